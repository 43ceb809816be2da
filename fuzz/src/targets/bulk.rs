//! The bulk protocol of `tollgate serve` and `tollgate load`.

use tollgate_transport::bulk::{
    BulkServer, Receiver, ReplyCounts, Request, RequestParse, MAX_REQUEST_LEN, REQUEST_LEN,
};

use crate::input::split_at_byte;
use crate::Input;

/// Streams start with a request read as `tollgate serve` reads it: parse
/// what is there, read as many more bytes as the parser asks for, again.
///
/// The first byte caps each read (1 to 256 bytes, as a stream may deliver
/// them), the rest is the stream. The parser must ask for more bytes only
/// while a request can still fit in [`MAX_REQUEST_LEN`], finish at the same
/// request whatever the read sizes, and a request it accepts must encode
/// back to the same bytes. An accepted CCA spec goes through the server's
/// check (the CCA registry). After a `0xff` byte, the rest is also fed to
/// the upload reply reader (8-byte counts) and the pattern checker.
pub fn bulk_request(data: &[u8]) {
    let mut input = Input::new(data);
    let cap = usize::from(input.u8()) + 1;
    let all = input.rest();
    let (stream, reply) = split_at_byte(all, 0xff);

    let whole = Request::parse(stream);
    let mut buf = Vec::new();
    let mut fed = 0;
    let outcome = loop {
        match Request::parse(&buf) {
            RequestParse::Need(want) => {
                assert!(want > 0);
                assert!(
                    buf.len() + want <= MAX_REQUEST_LEN,
                    "asks for {want} after {}",
                    buf.len()
                );
                let take = want.min(cap).min(stream.len() - fed);
                if take == 0 {
                    break None;
                }
                buf.extend_from_slice(&stream[fed..fed + take]);
                fed += take;
            }
            done => break Some(done),
        }
    };
    match outcome {
        Some(RequestParse::Done(got, len)) => {
            assert!(len >= REQUEST_LEN && len <= buf.len() && len <= MAX_REQUEST_LEN);
            assert_eq!(
                whole,
                RequestParse::Done(got.clone(), len),
                "read sizes change the outcome"
            );
            let again = if got.version == 1 {
                got.request.encode().to_vec()
            } else {
                got.request
                    .encode_v2(got.server_cca.as_deref())
                    .expect("an accepted spec encodes")
            };
            assert_eq!(
                again,
                stream[..len],
                "an accepted request encodes back to its bytes"
            );
            if let Some(spec) = &got.server_cca {
                let _ = BulkServer::new().check_cca(spec);
            }
        }
        Some(RequestParse::Malformed) => assert_eq!(whole, RequestParse::Malformed),
        Some(RequestParse::Need(_)) => unreachable!(),
        None => assert!(matches!(whole, RequestParse::Need(_))),
    }

    let mut counts = ReplyCounts::default();
    for chunk in reply.chunks(cap) {
        counts.on_bytes(chunk);
    }
    let last = (reply.len() >= 8).then(|| {
        let end = reply.len() - reply.len() % 8;
        u64::from_be_bytes(reply[end - 8..end].try_into().unwrap())
    });
    assert_eq!(counts.latest, last);
    assert_eq!(counts.finish(), last.filter(|_| reply.len() % 8 == 0));

    // Stream offsets stay below 2^62 (QUIC's largest).
    let mut rx = Receiver::new(u64::from(cap as u8) << 8);
    let mut offset = (cap as u64) << 54;
    for chunk in reply.chunks(cap) {
        rx.on_chunk(offset, chunk);
        offset += chunk.len() as u64;
    }
    assert_eq!(rx.received, reply.len() as u64);
    assert!(rx.mismatches <= rx.received);
}
