#!/bin/sh
# Build the ns-3 cross-check (Debian bookworm: apt-get install libns3-dev).
# libns3-dev's .pc files name libgsl*.so, which only libgsl-dev provides;
# the program does not need GSL, so those two flags are dropped.
set -e
cd "$(dirname "$0")"
L="ns3-core ns3-network ns3-internet ns3-point-to-point ns3-applications ns3-traffic-control"
LIBS=$(pkg-config --libs $L | tr ' ' '\n' | grep -v gsl | tr '\n' ' ')
g++ -O2 -o "${OUT:-dumbbell}" dumbbell.cc $(pkg-config --cflags $L) $LIBS
