use std::io::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use scheduler_common::data::{DataError, ErrorCode};
use scheduler_common::JobRef;

use super::client::{self, StoreError};
use super::{spawn, StoreConfig, StoreHandle};

const T: Duration = Duration::from_secs(5);

fn store(capacity: u64) -> StoreHandle {
    let cfg = StoreConfig { capacity, max_object: 64, ..StoreConfig::new("127.0.0.1:0".parse().unwrap()) };
    spawn(cfg).expect("store starts")
}

#[test]
fn put_get_and_fetch_from_another_host_address() {
    let a = store(1024);
    let b = store(1024);
    let job = JobRef::new(1, 2);
    assert_eq!(client::put(a.addr(), job, "j2/in-0", b"pixels", T).unwrap(), 6);
    assert_eq!(client::get(a.addr(), "j2/in-0", T).unwrap(), b"pixels");
    // What lives on A is not on B: a reader fetches it from its owner.
    assert_eq!(client::get(b.addr(), "j2/in-0", T).unwrap_err().code(), Some(ErrorCode::Missing));
    // A PUT of the same name replaces the object and its size.
    client::put(a.addr(), job, "j2/in-0", b"px", T).unwrap();
    assert_eq!(a.snapshot().used_bytes, 2);
}

#[test]
fn missing_full_and_too_large_are_clear_errors() {
    let s = store(100);
    let job = JobRef::new(1, 1);
    let e = client::get(s.addr(), "nothing", T).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Missing));
    assert!(e.to_string().contains("no object named nothing"), "{e}");
    client::put(s.addr(), job, "a", &[1; 60], T).unwrap();
    let e = client::put(s.addr(), job, "b", &[1; 50], T).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Full));
    assert!(e.to_string().contains("store full: 50 bytes needed, 60 of 100 bytes in use"), "{e}");
    let e = client::put(s.addr(), job, "c", &[1; 65], T).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TooLarge));
    let snap = s.snapshot();
    assert_eq!(
        (snap.objects, snap.used_bytes, snap.refused_full, snap.refused_too_large, snap.misses),
        (1, 60, 1, 1, 1)
    );
}

#[test]
fn host_down_is_unreachable() {
    let s = store(100);
    let addr = s.addr();
    drop(s);
    let e = client::get(addr, "a", Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, StoreError::Unreachable { .. }), "{e}");
}

#[test]
fn delete_job_drops_only_that_jobs_objects() {
    let s = store(1000);
    client::put(s.addr(), JobRef::new(1, 1), "a", &[0; 10], T).unwrap();
    client::put(s.addr(), JobRef::new(1, 1), "b", &[0; 20], T).unwrap();
    client::put(s.addr(), JobRef::new(1, 2), "c", &[0; 5], T).unwrap();
    assert_eq!(client::delete_job(s.addr(), JobRef::new(1, 1), T).unwrap(), (2, 30));
    assert_eq!(client::get(s.addr(), "c", T).unwrap().len(), 5);
    assert_eq!(s.snapshot().used_bytes, 5);
}

#[test]
fn malformed_frames_are_refused_and_counted() {
    let s = store(100);
    let send = |bytes: &[u8]| {
        let mut c = std::net::TcpStream::connect(s.addr()).unwrap();
        c.write_all(bytes).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut c, &mut out).unwrap();
        out
    };
    // Bad magic; then a GET with a name containing a space.
    let answer = send(&[0, 0, scheduler_common::VERSION, 2, 0, 0, 0, 0]);
    let f = super::wire::read_frame(&mut &answer[..]).unwrap();
    assert!(matches!(f.frame(), scheduler_common::data::DataFrame::Error { code: ErrorCode::BadRequest, .. }));
    send(&[0xb0, 0x17, scheduler_common::VERSION, 2, 0, 0, 0, 2, 1, b' ']);
    let snap = s.snapshot();
    assert_eq!(snap.decode_errors_by_kind, vec![(DataError::BadMagic.name(), 1), (DataError::BadName.name(), 1)]);
    // The store still serves.
    let addr: SocketAddr = s.addr();
    assert_eq!(client::get(addr, "x", T).unwrap_err().code(), Some(ErrorCode::Missing));
}
