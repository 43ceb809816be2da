//! EAL initialisation, the packet pool, device ports and the TSC clock.
//!
//! EAL can be initialised once per process. Failures are turned into
//! messages that say what to change (no hugepages: `--no-huge`; no ports:
//! the `--vdev` syntax).

use std::ffi::{c_char, c_int, CStr, CString};
use std::fmt;
use std::ptr::NonNull;

use tollgate_cca::Time;

use crate::ffi;

/// An EAL or device failure, with advice for the operator.
#[derive(Debug)]
pub struct DpdkError {
    /// What failed and why.
    pub message: String,
    /// What to change.
    pub hint: Option<String>,
}

impl DpdkError {
    pub(crate) fn new(message: impl Into<String>, hint: Option<String>) -> Self {
        DpdkError {
            message: message.into(),
            hint,
        }
    }
}

impl fmt::Display for DpdkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\nhint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for DpdkError {}

/// The text of a DPDK errno.
pub fn strerror(errnum: c_int) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or per-lcore
    // NUL-terminated buffer, valid until the next call on this thread; we
    // copy it out immediately.
    unsafe {
        let p = ffi::rte_strerror(errnum);
        if p.is_null() {
            return format!("errno {errnum}");
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

const VDEV_HINT: &str = "create virtual ports with EAL arguments, e.g. \
    `--no-huge --no-pci -m 512 --vdev net_null0 --vdev net_null1` (benchmark), \
    `--vdev net_ring0` (in-memory loopback), `--vdev net_af_packet0,iface=veth0` (a kernel interface), \
    or bind NICs with `dpdk-devbind.py --bind=vfio-pci 0000:01:00.0` and pass `-a 0000:01:00.0`";

/// The initialised EAL. Dropping it calls `rte_eal_cleanup` and removes
/// EAL's runtime directory (`/var/run/dpdk/<file-prefix>`) if it is empty,
/// as it is with `--no-shconf --no-telemetry`: a process started with a
/// file prefix of its own (the benchmark's children, the tests) leaves
/// nothing behind. Without `--no-shconf` the directory holds EAL's shared
/// configuration (13 MB with `--no-huge`), and without `--no-telemetry` the
/// telemetry socket, removed only after this drop; the directory is then
/// kept, as DPDK leaves it.
#[derive(Debug)]
pub struct Eal {
    _argv: Vec<CString>,
    runtime_dir: Option<std::path::PathBuf>,
}

impl Eal {
    /// Initialise EAL with `args` (without the program name).
    pub fn init(args: &[String]) -> Result<Eal, DpdkError> {
        // The fast path reads rte_mbuf fields at fixed offsets: refuse to
        // start on a DPDK whose layout differs.
        crate::mbuf::layout::check().map_err(|e| DpdkError::new(e, None))?;
        let mut owned = vec![CString::new("tollgate-router").unwrap_or_default()];
        for a in args {
            owned.push(CString::new(a.as_str()).map_err(|_| {
                DpdkError::new(format!("EAL argument {a:?} contains a NUL byte"), None)
            })?);
        }
        let mut argv: Vec<*mut c_char> = owned.iter().map(|s| s.as_ptr() as *mut c_char).collect();
        argv.push(std::ptr::null_mut());
        let argc = (argv.len() - 1) as c_int;
        tracing::debug!(?args, "initialising EAL");
        // SAFETY: argv is a NULL-terminated array of `argc` valid C strings
        // owned by `owned`, which lives in the returned Eal (EAL may keep
        // pointers into it). EAL may permute the pointer array, which is ours.
        let rc = unsafe { ffi::rte_eal_init(argc, argv.as_mut_ptr()) };
        if rc < 0 {
            // SAFETY: reads the calling thread's rte_errno; no preconditions.
            let errno = unsafe { ffi::tg_errno() };
            return Err(eal_error(errno, args));
        }
        // SAFETY: EAL is initialised; the result is NULL or a C string in
        // EAL's static storage.
        let dir = unsafe { ffi::rte_eal_get_runtime_dir() };
        let runtime_dir = (!dir.is_null()).then(|| {
            // SAFETY: non-NULL, NUL-terminated (above).
            let dir = unsafe { std::ffi::CStr::from_ptr(dir) };
            std::path::PathBuf::from(dir.to_string_lossy().into_owned())
        });
        Ok(Eal {
            _argv: owned,
            runtime_dir,
        })
    }

    /// Available ports.
    pub fn port_count(&self) -> u16 {
        // SAFETY: EAL is initialised (we hold an Eal).
        unsafe { ffi::rte_eth_dev_count_avail() }
    }

    /// The port id of a device name (`net_null0`), or of a decimal port index.
    pub fn find_port(&self, name: &str) -> Result<u16, DpdkError> {
        let n = self.port_count();
        let mut names = Vec::new();
        for id in 0..n {
            let dev = port_name(id);
            if dev == name || name.parse::<u16>().ok() == Some(id) {
                return Ok(id);
            }
            names.push(dev);
        }
        let hint = if n == 0 {
            VDEV_HINT.to_string()
        } else {
            format!("ports present: {}", names.join(", "))
        };
        Err(DpdkError::new(
            format!("no DPDK port named {name:?}"),
            Some(hint),
        ))
    }

    /// Fail with the `--vdev` hint when no port exists.
    pub fn require_ports(&self) -> Result<(), DpdkError> {
        if self.port_count() == 0 {
            Err(DpdkError::new(
                "EAL found no ports",
                Some(VDEV_HINT.to_string()),
            ))
        } else {
            Ok(())
        }
    }
}

impl Drop for Eal {
    fn drop(&mut self) {
        // SAFETY: called once, after every port, pool and mbuf owned by the
        // dataplane has been released (they are dropped before the Eal).
        unsafe {
            ffi::rte_eal_cleanup();
        }
        // Only an empty directory: `remove_dir` fails on any other.
        if let Some(dir) = &self.runtime_dir {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

fn eal_error(errno: c_int, args: &[String]) -> DpdkError {
    let has = |flag: &str| {
        args.iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
    };
    let msg = format!(
        "EAL initialisation failed: {} (rte_errno {errno})",
        strerror(errno)
    );
    let hint = match errno {
        libc::EACCES | libc::ENOMEM if !has("--no-huge") => Some(
            "EAL could not get hugepage memory. Either reserve hugepages \
             (`echo 1024 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages` and mount hugetlbfs) \
             or run without them: add `--no-huge -m 512` to the EAL arguments"
                .to_string(),
        ),
        libc::EACCES => Some("run as root (or with CAP_NET_RAW/CAP_SYS_ADMIN for af_packet and memory locking)".to_string()),
        libc::EALREADY => Some("EAL can only be initialised once per process".to_string()),
        libc::EINVAL => Some(format!(
            "check the EAL arguments after `--` (e.g. `-l 0 --no-huge --no-pci -m 512 --vdev net_null0`); got {args:?}"
        )),
        libc::ENODEV | libc::ENOENT => Some(VDEV_HINT.to_string()),
        libc::ENOTSUP => Some("this CPU or kernel lacks a feature DPDK needs; see the EAL log above".to_string()),
        _ => Some("see the EAL log lines above for the cause".to_string()),
    };
    DpdkError::new(msg, hint)
}

/// A port's device name.
pub fn port_name(port: u16) -> String {
    let mut buf = [0 as c_char; 128];
    // SAFETY: buf is writable for its length; the shim NUL-terminates.
    let rc = unsafe { ffi::tg_port_name(port, buf.as_mut_ptr(), buf.len()) };
    if rc != 0 {
        return format!("port{port}");
    }
    // SAFETY: tg_port_name wrote a NUL-terminated string into buf.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// A packet-buffer pool (`rte_pktmbuf_pool_create`).
#[derive(Debug)]
pub struct Mempool {
    ptr: NonNull<ffi::RteMempool>,
}

impl Mempool {
    /// A pool of `n` mbufs with the default 2 KiB data room.
    pub fn new(name: &str, n: u32, _eal: &Eal) -> Result<Mempool, DpdkError> {
        let cname =
            CString::new(name).map_err(|_| DpdkError::new("pool name contains NUL", None))?;
        let cache = 256.min(n / 4);
        // SAFETY: EAL is initialised (an &Eal exists); name is a valid C string.
        let p = unsafe {
            ffi::rte_pktmbuf_pool_create(
                cname.as_ptr(),
                n,
                cache,
                0,
                ffi::RTE_MBUF_DEFAULT_BUF_SIZE,
                ffi::SOCKET_ID_ANY,
            )
        };
        match NonNull::new(p) {
            Some(ptr) => Ok(Mempool { ptr }),
            None => {
                // SAFETY: reads this thread's rte_errno.
                let errno = unsafe { ffi::tg_errno() };
                Err(DpdkError::new(
                    format!(
                        "cannot create mbuf pool of {n} buffers: {}",
                        strerror(errno)
                    ),
                    Some(
                        "give EAL more memory (`-m 1024`) or lower `mbufs` in the config"
                            .to_string(),
                    ),
                ))
            }
        }
    }

    /// The raw pool pointer.
    pub fn as_ptr(&self) -> *mut ffi::RteMempool {
        self.ptr.as_ptr()
    }

    /// Free buffers in the pool.
    pub fn available(&self) -> u32 {
        // SAFETY: the pool is live for &self.
        unsafe { ffi::rte_mempool_avail_count(self.ptr.as_ptr()) }
    }
}

/// A started device port.
#[derive(Debug)]
pub struct EthPort {
    /// DPDK port id.
    pub id: u16,
    /// Device name.
    pub name: String,
    /// MAC address.
    pub mac: [u8; 6],
    /// Link speed in Mbit/s (0 if unknown).
    pub speed_mbps: u32,
    /// RX/TX queue pairs.
    pub queues: u16,
}

impl EthPort {
    /// Configure `queues` RX/TX queue pairs with `rxd`/`txd` descriptors, start, enable promiscuous mode.
    pub fn start(
        id: u16,
        queues: u16,
        rxd: u16,
        txd: u16,
        pool: &Mempool,
    ) -> Result<EthPort, DpdkError> {
        let mut mac = [0u8; 6];
        let mut err = [0 as c_char; 256];
        // SAFETY: the pool is live; mac has 6 writable bytes; err is writable
        // for its length and the shim NUL-terminates what it writes.
        let rc = unsafe {
            ffi::tg_port_init(
                id,
                queues,
                rxd,
                txd,
                pool.as_ptr(),
                mac.as_mut_ptr(),
                err.as_mut_ptr(),
                err.len(),
            )
        };
        let name = port_name(id);
        if rc != 0 {
            // SAFETY: err is NUL-terminated (zero-initialised, and snprintf terminates).
            let text = unsafe { CStr::from_ptr(err.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            return Err(DpdkError::new(format!("port {id} ({name}): {text}"), None));
        }
        // SAFETY: the port is started.
        let speed_mbps = unsafe { ffi::tg_link_speed_mbps(id) };
        tracing::info!(port = id, %name, queues, rxd, txd, speed_mbps, "port started");
        Ok(EthPort {
            id,
            name,
            mac,
            speed_mbps,
            queues,
        })
    }

    /// Device counters: ipackets, opackets, ibytes, obytes, imissed, ierrors, oerrors, rx_nombuf.
    pub fn device_stats(&self) -> [u64; 8] {
        let mut out = [0u64; 8];
        // SAFETY: out has the 8 slots the shim writes.
        let _ = unsafe { ffi::tg_port_stats(self.id, out.as_mut_ptr()) };
        out
    }
}

impl Drop for EthPort {
    fn drop(&mut self) {
        // SAFETY: the port was started by us and is not used after this.
        unsafe { ffi::tg_port_close(self.id) }
    }
}

/// Time from the TSC, as the library's `now` (nanoseconds since the clock's creation).
#[derive(Clone, Copy, Debug)]
pub struct TscClock {
    start: u64,
    hz: u64,
    /// Nanoseconds per cycle in 32.32 fixed point.
    ns_per_cycle_q32: u128,
}

impl TscClock {
    /// A clock starting now.
    pub fn new(_eal: &Eal) -> TscClock {
        // SAFETY: EAL is initialised, so the TSC frequency is calibrated.
        let (start, hz) = unsafe { (ffi::tg_tsc_cycles(), ffi::tg_tsc_hz()) };
        let hz = hz.max(1);
        TscClock {
            start,
            hz,
            ns_per_cycle_q32: (1_000_000_000u128 << 32) / u128::from(hz),
        }
    }

    /// Raw TSC cycles.
    #[inline]
    pub fn cycles(&self) -> u64 {
        // SAFETY: reads the TSC; no preconditions.
        unsafe { ffi::tg_tsc_cycles() }
    }

    /// TSC frequency in Hz.
    pub fn hz(&self) -> u64 {
        self.hz
    }

    /// Cycles to a `Time` since the clock's start.
    #[inline]
    pub fn cycles_to_time(self, cycles: u64) -> Time {
        let dc = u128::from(cycles.saturating_sub(self.start));
        Time::from_nanos(((dc * self.ns_per_cycle_q32) >> 32) as u64)
    }

    /// The current time.
    #[inline]
    pub fn now(&self) -> Time {
        self.cycles_to_time(self.cycles())
    }
}
