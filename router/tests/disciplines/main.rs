//! Algorithm tests of the queue disciplines, the shaper and the delay line.
//! One test binary (modules below) to keep link time down.

mod cebinae;
mod choke;
mod common;
mod enqueue_dequeue;
mod port;
mod red;
mod rrmqs;
