//! A remote export used as a device: a pool of [`Connection`]s with bounded retries, backoff,
//! stall timeouts, automatic reconnection and fault counters.
//!
//! Durability across faults: a write acknowledged on a connection that later dies may be lost
//! with the server's memory, and a FLUSH on another connection does not cover it. The pool
//! counts connection deaths (its *epoch*); [`Remote::flush_since`] succeeds only if no
//! connection died since the caller's epoch, so "flushed" always means "the remote
//! acknowledged a FLUSH covering these writes".

use crate::client::{ClientError, Command, Connection, ExportInfo, NbdUri};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tiercache_blockdev::{DemoteReply, RemoteStats};

/// Pool and fault-handling settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteConfig {
    /// Connections kept open (used only when the server offers multi-conn; else one).
    pub connections: usize,
    /// Longest wait for one reply; a request still unanswered then marks its connection
    /// stalled (dead) and is retried.
    pub timeout: Duration,
    /// Retries after the first attempt before an error is returned.
    pub retries: u32,
    /// Wait before the first retry; doubles each retry (capped at 2 s).
    pub backoff: Duration,
    /// Longest wait to connect and complete the handshake.
    pub connect_timeout: Duration,
    /// Largest payload sent in one request; larger transfers are split.
    pub max_request: u32,
    /// Most requests of one [`Remote::write_many`] in flight at once, spread over the pool's
    /// connections (1: one request per round trip).
    pub pipeline: usize,
    /// Ask the server for tiercache's DEMOTE extension (one session for the whole pool, see
    /// [`crate::demote`]); a server that refuses it is used without demotes.
    pub demote: bool,
}

impl Default for RemoteConfig {
    fn default() -> Self {
        RemoteConfig {
            connections: 4,
            timeout: Duration::from_secs(5),
            retries: 3,
            backoff: Duration::from_millis(100),
            connect_timeout: Duration::from_secs(2),
            max_request: 4 << 20,
            pipeline: 64,
            demote: false,
        }
    }
}

/// Counters of a [`Remote`], readable at any time.
#[derive(Debug, Default)]
pub struct RemoteCounters {
    requests: AtomicU64,
    retries: AtomicU64,
    error_replies: AtomicU64,
    timeouts: AtomicU64,
    reconnects: AtomicU64,
    failed_connects: AtomicU64,
    failed_requests: AtomicU64,
    flushes: AtomicU64,
    flushes_refused: AtomicU64,
    demotes_sent: AtomicU64,
    demotes_accepted: AtomicU64,
    demotes_already_held: AtomicU64,
    demotes_rejected: AtomicU64,
    demotes_failed: AtomicU64,
}

/// A remote NBD export with retries and reconnection.
pub struct Remote {
    uri: NbdUri,
    cfg: RemoteConfig,
    info: ExportInfo,
    slots: Vec<Mutex<Arc<Connection>>>,
    next: AtomicUsize,
    counters: RemoteCounters,
    losses: Arc<AtomicU64>,
    /// The pool's DEMOTE session id, when asked for.
    demote_session: Option<u64>,
    /// The connection block status is asked on, once opened (`Some(None)`: the server has
    /// no `base:allocation` to offer).
    status: Mutex<Option<Option<crate::client::StatusConnection>>>,
}

impl Remote {
    /// Connects every connection of the pool (all at once, so that a later new connection
    /// always follows a counted loss).
    pub fn connect(uri: NbdUri, cfg: RemoteConfig) -> Result<Self, ClientError> {
        let losses = Arc::new(AtomicU64::new(0));
        let demote_session = cfg.demote.then(session_id);
        let first =
            Connection::open_with(&uri, cfg.connect_timeout, losses.clone(), demote_session)?;
        let info = first.info();
        let n = if info.multi_conn() {
            cfg.connections.max(1)
        } else {
            1
        };
        let mut slots = vec![Mutex::new(Arc::new(first))];
        for _ in 1..n {
            let c =
                Connection::open_with(&uri, cfg.connect_timeout, losses.clone(), demote_session)?;
            slots.push(Mutex::new(Arc::new(c)));
        }
        Ok(Remote {
            uri,
            cfg,
            info,
            slots,
            next: AtomicUsize::new(0),
            counters: RemoteCounters::default(),
            losses,
            demote_session,
            status: Mutex::new(None),
        })
    }

    /// The allocation of `len` bytes at `offset` (as
    /// [`tiercache_blockdev::BlockDevice::allocation`]): the server's `base:allocation`, asked
    /// on a connection of its own, opened at the first query. Where the server offers none,
    /// or the query fails (the connection is dropped, to be opened again at the next), all
    /// data: always a correct answer, so a broken link only costs the holes.
    pub fn allocation(&self, offset: u64, len: u64) -> Vec<tiercache_blockdev::Extent> {
        let all_data = || vec![tiercache_blockdev::Extent { len, flags: 0 }];
        if len == 0 {
            return Vec::new();
        }
        let mut st = self.status.lock().unwrap_or_else(|e| e.into_inner());
        if st.is_none() {
            match crate::client::StatusConnection::open(&self.uri, self.cfg.connect_timeout) {
                Ok(c) => *st = Some(c),
                Err(_) => return all_data(),
            }
        }
        let Some(Some(conn)) = st.as_ref() else {
            return all_data();
        };
        // A request's length is 32 bits: a longer query is answered in part (the protocol
        // lets a reply cover less; the caller asks again from where it ended).
        let ask = len.min(u64::from(u32::MAX) & !4095) as u32;
        match conn.allocation(offset, ask) {
            Ok(x) => x,
            Err(_) => {
                *st = None;
                all_data()
            }
        }
    }

    /// The export as first connected.
    pub fn info(&self) -> ExportInfo {
        self.info
    }

    /// Size of the export in bytes.
    pub fn size(&self) -> u64 {
        self.info.size
    }

    /// Connection losses so far: pass it to [`flush_since`](Self::flush_since) after writing.
    pub fn epoch(&self) -> u64 {
        self.losses.load(Relaxed)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> RemoteStats {
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Relaxed);
        RemoteStats {
            uri: self.uri.to_string(),
            connections: self.slots.len(),
            requests: g(&c.requests),
            retries: g(&c.retries),
            error_replies: g(&c.error_replies),
            timeouts: g(&c.timeouts),
            connection_losses: g(&self.losses),
            reconnects: g(&c.reconnects),
            failed_connects: g(&c.failed_connects),
            failed_requests: g(&c.failed_requests),
            flushes: g(&c.flushes),
            flushes_refused: g(&c.flushes_refused),
            demote_negotiated: self.demote_enabled(),
            demotes_sent: g(&c.demotes_sent),
            demotes_accepted: g(&c.demotes_accepted),
            demotes_already_held: g(&c.demotes_already_held),
            demotes_rejected: g(&c.demotes_rejected),
            demotes_failed: g(&c.demotes_failed),
        }
    }

    /// A live connection of slot `i`, reconnecting if it died.
    fn conn(&self, i: usize) -> Result<Arc<Connection>, ClientError> {
        let mut slot = self.slots[i].lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_alive() {
            return Ok(slot.clone());
        }
        let c = Connection::open_with(
            &self.uri,
            self.cfg.connect_timeout,
            self.losses.clone(),
            self.demote_session,
        )
        .inspect_err(|_| {
            self.counters.failed_connects.fetch_add(1, Relaxed);
        })?;
        if c.info().size != self.info.size {
            c.kill();
            return Err(ClientError::Protocol(format!(
                "export size changed from {} to {} bytes across a reconnect",
                self.info.size,
                c.info().size
            )));
        }
        self.counters.reconnects.fetch_add(1, Relaxed);
        *slot = Arc::new(c);
        Ok(slot.clone())
    }

    /// One request with retries: error replies and connection faults are retried with
    /// backoff; requests the export cannot take are not.
    fn run(
        &self,
        cmd: Command,
        fua: bool,
        offset: u64,
        len: u32,
        payload: &[u8],
    ) -> Result<Vec<u8>, ClientError> {
        let c = &self.counters;
        c.requests.fetch_add(1, Relaxed);
        let mut wait = self.cfg.backoff;
        let mut attempt = 0;
        loop {
            let i = self.next.fetch_add(1, Relaxed) % self.slots.len();
            let out = self
                .conn(i)
                .and_then(|conn| conn.call(cmd, fua, offset, len, payload, self.cfg.timeout));
            let e = match out {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            match &e {
                ClientError::Invalid(_) | ClientError::Handshake(_) => {
                    c.failed_requests.fetch_add(1, Relaxed);
                    return Err(e);
                }
                ClientError::Reply(_) => {
                    c.error_replies.fetch_add(1, Relaxed);
                }
                ClientError::TimedOut(_) => {
                    c.timeouts.fetch_add(1, Relaxed);
                }
                _ => {}
            }
            if attempt >= self.cfg.retries {
                c.failed_requests.fetch_add(1, Relaxed);
                return Err(e);
            }
            attempt += 1;
            c.retries.fetch_add(1, Relaxed);
            std::thread::sleep(wait);
            wait = (wait * 2).min(Duration::from_secs(2));
        }
    }

    fn chunks(&self, offset: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize)> {
        let max = self.cfg.max_request.max(4096) as usize;
        (0..len)
            .step_by(max)
            .map(move |at| (offset + at as u64, at, max.min(len - at)))
    }

    /// Reads `buf.len()` bytes at `offset`.
    pub fn read(&self, buf: &mut [u8], offset: u64) -> Result<(), ClientError> {
        for (off, at, n) in self.chunks(offset, buf.len()).collect::<Vec<_>>() {
            let data = self.run(Command::Read, false, off, n as u32, &[])?;
            buf[at..at + n].copy_from_slice(&data);
        }
        Ok(())
    }

    /// Writes `data` at `offset` (with FUA: durable on the remote when this returns).
    pub fn write(&self, data: &[u8], offset: u64, fua: bool) -> Result<(), ClientError> {
        if self.info.read_only() {
            return Err(ClientError::Invalid("the export is read-only".into()));
        }
        let fua = fua && self.info.can_fua();
        for (off, at, n) in self.chunks(offset, data.len()) {
            self.run(Command::Write, fua, off, n as u32, &data[at..at + n])?;
        }
        Ok(())
    }

    /// Writes each `(offset, data)` of `writes`, up to [`RemoteConfig::pipeline`] requests in
    /// flight at once over the pool's connections instead of one per round trip. A request
    /// that fails in flight is retried on its own as [`write`](Self::write) would; the first
    /// error that survives its retries is returned (after every request was answered). The
    /// writes must not overlap: their order on the remote is not kept.
    pub fn write_many(&self, writes: &[(u64, &[u8])]) -> Result<(), ClientError> {
        if self.info.read_only() {
            return Err(ClientError::Invalid("the export is read-only".into()));
        }
        let pieces: Vec<(u64, &[u8])> = writes
            .iter()
            .flat_map(|&(offset, data)| {
                self.chunks(offset, data.len())
                    .map(move |(off, at, n)| (off, &data[at..at + n]))
            })
            .collect();
        let c = &self.counters;
        let mut result = Ok(());
        for window in pieces.chunks(self.cfg.pipeline.max(1)) {
            // Live connections, each used for its share of the window (at least one: a
            // dead pool reconnects, or every request goes the retrying way below).
            let conns: Vec<Arc<Connection>> = (0..self.slots.len())
                .filter_map(|i| self.conn(i).ok())
                .collect();
            let sent: Vec<Option<crate::client::Sent<'_>>> = window
                .iter()
                .enumerate()
                .map(|(j, &(off, data))| {
                    let conn = conns.get(j % conns.len().max(1))?;
                    conn.send(Command::Write, false, off, data.len() as u32, data)
                        .ok()
                })
                .collect();
            for (&(off, data), s) in window.iter().zip(sent) {
                let answered = s.map(|s| s.wait(self.cfg.timeout));
                let out = match answered {
                    Some(Ok(_)) => {
                        c.requests.fetch_add(1, Relaxed);
                        Ok(())
                    }
                    Some(Err(e @ ClientError::Invalid(_))) => {
                        c.requests.fetch_add(1, Relaxed);
                        c.failed_requests.fetch_add(1, Relaxed);
                        Err(e)
                    }
                    failed => {
                        // Retried the ordinary way (counted there as a request).
                        if let Some(Err(e)) = &failed {
                            match e {
                                ClientError::Reply(_) => c.error_replies.fetch_add(1, Relaxed),
                                ClientError::TimedOut(_) => c.timeouts.fetch_add(1, Relaxed),
                                _ => 0,
                            };
                            c.retries.fetch_add(1, Relaxed);
                        }
                        self.run(Command::Write, false, off, data.len() as u32, data)
                            .map(|_| ())
                    }
                };
                if result.is_ok() {
                    result = out;
                }
            }
        }
        result
    }

    /// Discards a range, if the export supports TRIM (a hint: otherwise nothing happens).
    pub fn trim(&self, offset: u64, len: u64) -> Result<(), ClientError> {
        if !self.info.can_trim() || self.info.read_only() {
            return Ok(());
        }
        let max = self.cfg.max_request as u64;
        let mut at = 0;
        while at < len {
            let n = max.min(len - at);
            self.run(Command::Trim, false, offset + at, n as u32, &[])?;
            at += n;
        }
        Ok(())
    }

    /// Makes writes acknowledged since `epoch` (from [`epoch`](Self::epoch), read before
    /// they were sent) durable: a FLUSH, refused if any connection died since `epoch` (the
    /// writes it carried may be lost; write them again).
    pub fn flush_since(&self, epoch: u64) -> Result<(), ClientError> {
        if self.info.can_flush() {
            self.run(Command::Flush, false, 0, 0, &[])?;
            self.counters.flushes.fetch_add(1, Relaxed);
        }
        let now = self.epoch();
        if now != epoch {
            self.counters.flushes_refused.fetch_add(1, Relaxed);
            return Err(ClientError::WritesMayBeLost(now - epoch));
        }
        Ok(())
    }

    /// Whether the server took tiercache's DEMOTE extension (on the first connection: every
    /// connection of the pool asks for it, so a server that did not is not demoted to).
    pub fn demote_enabled(&self) -> bool {
        self.slots[0]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .demote_enabled()
    }

    /// Demotes a clean copy of `data` at `offset` to the server (one attempt, no retries: a
    /// lost demote only costs a future miss). Without the extension nothing is sent and the
    /// answer is [`DemoteReply::Rejected`].
    pub fn demote(&self, data: &[u8], offset: u64) -> Result<DemoteReply, ClientError> {
        let c = &self.counters;
        if !self.demote_enabled() || data.len() > self.cfg.max_request as usize {
            return Ok(DemoteReply::Rejected);
        }
        c.demotes_sent.fetch_add(1, Relaxed);
        let i = self.next.fetch_add(1, Relaxed) % self.slots.len();
        let out = self.conn(i).and_then(|conn| {
            conn.call(
                Command::Demote,
                false,
                offset,
                data.len() as u32,
                data,
                self.cfg.timeout,
            )
        });
        let reply = match out {
            Ok(_) => Ok(DemoteReply::Accepted),
            Err(ClientError::Reply(e)) => {
                crate::demote::reply_of_errno(e).ok_or(ClientError::Reply(e))
            }
            Err(e) => Err(e),
        };
        let counter = match &reply {
            Ok(DemoteReply::Accepted) => &c.demotes_accepted,
            Ok(DemoteReply::AlreadyHeld) => &c.demotes_already_held,
            Ok(DemoteReply::Rejected) => &c.demotes_rejected,
            Err(_) => &c.demotes_failed,
        };
        counter.fetch_add(1, Relaxed);
        reply
    }
}

/// A session id unlikely to repeat: the clock, the process and a counter, mixed.
fn session_id() -> u64 {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let x = now ^ ((std::process::id() as u64) << 32) ^ COUNT.fetch_add(1, Relaxed);
    tiercache_core::splitmix::mix64(x)
}
