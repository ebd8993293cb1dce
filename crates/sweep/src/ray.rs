//! The Ray executor of sweeps: a [`Backend`] that hands each point to a driver process (the
//! tiercache Python package's `python -m tiercache.ray_driver`), which runs it as one Ray task on
//! a cluster and sends the result record back.
//!
//! The runner is the local one ([`crate::run_points`]): the same pending points, the same
//! results files appended as points finish, the same resume and progress bar. Only where a point
//! runs changes; the runner's worker threads each wait for one point in flight, so `jobs` is the
//! number of Ray tasks in flight (by default the cluster's CPUs, which the driver reports).
//!
//! Protocol (JSON lines): the driver first writes `{"cpus": N}` (or `{"error": "..."}` when it
//! cannot reach Ray); then for each `{"id": K, "point": PAYLOAD}` line it reads, it writes
//! `{"id": K, "record": {...}}` or `{"id": K, "error": "..."}` once the point finished (in any
//! order). When its input closes it stops. [`point_payload`] / [`point_from_payload`] carry a
//! point to the task and back into a [`PointSpec`].

use crate::runner::Backend;
use crate::spec::PointSpec;
use crate::SweepError;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// A point as the Ray task receives it: what [`point_from_payload`] needs to run it.
pub fn point_payload(p: &PointSpec) -> serde_json::Value {
    serde_json::json!({
        "id": p.id,
        "name": p.name,
        "workload": p.workload,
        "rep": p.rep,
        "seed": p.seed,
        "index": p.index,
        "default": p.is_default,
        "axes": p.axes.iter().map(|s| serde_json::json!({
            "axis": s.axis,
            "label": s.label,
        })).collect::<Vec<_>>(),
        "overrides": p.overrides,
        // TOML text: the resolved document exactly (JSON has no dates, TOML no nulls).
        "doc": toml::to_string(&p.doc.value).unwrap_or_default(),
        "source": p.doc.source,
        "base_dir": p.base_dir,
    })
}

/// The point a [`point_payload`] carries, with its resolved configuration (axis values are not
/// carried: running a point needs only its document). Errors name the missing field.
pub fn point_from_payload(v: &serde_json::Value) -> Result<PointSpec, SweepError> {
    let field = |k: &str| {
        v.get(k).ok_or_else(|| SweepError::Spec {
            at: format!("point payload `{k}`"),
            message: "missing".into(),
        })
    };
    let text = |k: &str| -> Result<String, SweepError> {
        field(k)?
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| SweepError::Spec {
                at: format!("point payload `{k}`"),
                message: "not a string".into(),
            })
    };
    let number = |k: &str| -> Result<u64, SweepError> {
        field(k)?.as_u64().ok_or_else(|| SweepError::Spec {
            at: format!("point payload `{k}`"),
            message: "not a non-negative integer".into(),
        })
    };
    let source = text("source")?;
    let doc = tiercache_config::Document::parse(&text("doc")?, &source)?;
    Ok(PointSpec {
        id: text("id")?,
        name: text("name")?,
        workload: text("workload")?,
        rep: number("rep")? as u32,
        seed: number("seed")?,
        index: number("index")? as usize,
        is_default: v.get("default").and_then(|d| d.as_bool()).unwrap_or(false),
        axes: Vec::new(),
        overrides: v
            .get("overrides")
            .and_then(|o| o.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        doc,
        base_dir: PathBuf::from(text("base_dir")?),
    })
}

type Reply = Result<serde_json::Value, String>;

/// Replies awaited by id; `None` once the driver's output ended (every later point fails).
type Waiting = Arc<Mutex<Option<HashMap<u64, mpsc::Sender<Reply>>>>>;

/// A [`Backend`] that runs each point as a Ray task through a driver process.
pub struct RayBackend {
    child: Mutex<Child>,
    stdin: Mutex<Option<ChildStdin>>,
    waiting: Waiting,
    next_id: AtomicU64,
    cpus: usize,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl RayBackend {
    /// Starts the driver (`command`, with its stdin and stdout piped; stderr is inherited so its
    /// messages reach the user) and waits for its greeting. Fails with the driver's own message
    /// when it cannot reach Ray, or when it cannot be started.
    pub fn start(mut command: Command) -> Result<Self, SweepError> {
        let shown = format!("{command:?}");
        let io_err = |source: std::io::Error| SweepError::Io {
            path: PathBuf::from(&shown),
            source,
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(io_err)?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io_err(std::io::Error::other("the driver's output is not piped")))?;
        let mut lines = BufReader::new(stdout);
        let mut hello = String::new();
        lines.read_line(&mut hello).map_err(io_err)?;
        let greeting: serde_json::Value = serde_json::from_str(hello.trim()).map_err(|_| {
            let _ = child.kill();
            let _ = child.wait();
            io_err(std::io::Error::other(if hello.trim().is_empty() {
                "the Ray driver exited before it started (its error is above)".to_string()
            } else {
                format!("the Ray driver's greeting is not JSON: `{}`", hello.trim())
            }))
        })?;
        if let Some(e) = greeting.get("error").and_then(|e| e.as_str()) {
            let _ = child.wait();
            return Err(io_err(std::io::Error::other(e.to_string())));
        }
        let cpus = greeting
            .get("cpus")
            .and_then(|c| c.as_u64())
            .unwrap_or(1)
            .max(1) as usize;
        let waiting: Waiting = Arc::new(Mutex::new(Some(HashMap::new())));
        let reader = {
            let waiting = waiting.clone();
            std::thread::spawn(move || read_replies(lines, &waiting))
        };
        Ok(Self {
            child: Mutex::new(child),
            stdin: Mutex::new(stdin),
            waiting,
            next_id: AtomicU64::new(0),
            cpus,
            reader: Some(reader),
        })
    }

    /// CPUs of the Ray cluster as the driver found them: the default number of points in flight.
    pub fn cluster_cpus(&self) -> usize {
        self.cpus
    }
}

/// Hands each reply to the point waiting for it; when the driver's output ends, fails every
/// point still waiting and every later one.
fn read_replies(lines: impl BufRead, waiting: &Waiting) {
    for line in lines.lines() {
        let Ok(line) = line else { break };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            // Not ours (a library printing on stdout): the driver keeps its replies on lines of
            // their own, so skipping it loses nothing.
            continue;
        };
        let Some(id) = v.get("id").and_then(|i| i.as_u64()) else {
            continue;
        };
        let reply = match (v.get("record"), v.get("error")) {
            (Some(r), _) => Ok(r.clone()),
            (None, Some(e)) => Err(e.as_str().unwrap_or("unknown error").to_string()),
            (None, None) => Err(format!("the Ray driver's reply has no record: {line}")),
        };
        let sender = waiting
            .lock()
            .ok()
            .and_then(|mut w| w.as_mut().and_then(|m| m.remove(&id)));
        if let Some(s) = sender {
            let _ = s.send(reply);
        }
    }
    if let Ok(mut w) = waiting.lock() {
        // Dropping the senders wakes every waiter with a disconnect.
        w.take();
    }
}

impl Backend for RayBackend {
    fn run(&self, point: &PointSpec) -> Result<serde_json::Value, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        {
            let mut w = self.waiting.lock().map_err(|e| e.to_string())?;
            match w.as_mut() {
                Some(m) => m.insert(id, tx),
                None => return Err("the Ray driver has exited".into()),
            };
        }
        let mut line = serde_json::json!({ "id": id, "point": point_payload(point) }).to_string();
        line.push('\n');
        {
            let mut stdin = self.stdin.lock().map_err(|e| e.to_string())?;
            let sent = stdin
                .as_mut()
                .map(|s| s.write_all(line.as_bytes()).and_then(|_| s.flush()));
            if !matches!(sent, Some(Ok(()))) {
                return Err("the Ray driver has exited (its input is closed)".into());
            }
        }
        rx.recv()
            .unwrap_or_else(|_| Err("the Ray driver exited before the point finished".into()))
    }
}

impl Drop for RayBackend {
    fn drop(&mut self) {
        // Closing its input tells the driver to stop; it exits once nothing is in flight.
        if let Ok(mut s) = self.stdin.lock() {
            s.take();
        }
        if let Ok(mut c) = self.child.lock() {
            let _ = c.wait();
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::SweepSpec;

    fn points() -> Vec<PointSpec> {
        SweepSpec::parse(
            "[base.cache]\nline_size = '4KiB'\n[base.run]\nseed = 3\n[[axis]]\nkey = 'cache.line_size'\nvalues = ['4KiB', '32KiB']\n",
            "inline.toml",
            std::path::Path::new("/tmp"),
            "demo",
        )
        .unwrap()
        .expand()
        .unwrap()
    }

    #[test]
    fn a_payload_carries_the_point_and_its_document() {
        for p in points() {
            let back = point_from_payload(&point_payload(&p)).unwrap();
            assert_eq!(back.id, p.id);
            assert_eq!(back.name, p.name);
            assert_eq!((back.rep, back.seed, back.index), (p.rep, p.seed, p.index));
            assert_eq!(back.doc.value, p.doc.value);
            assert_eq!(back.doc.source, p.doc.source);
            assert_eq!(back.base_dir, p.base_dir);
            assert_eq!(back.overrides, p.overrides);
        }
    }

    #[test]
    fn a_payload_without_a_field_names_it() {
        let mut v = point_payload(&points()[0]);
        v.as_object_mut().unwrap().remove("doc");
        let e = point_from_payload(&v).unwrap_err().to_string();
        assert!(e.contains("`doc`"), "{e}");
    }

    /// A driver written in shell: greets, answers every point with its id as the record, and
    /// reports an error for the second. The backend matches replies to points by id.
    #[test]
    fn replies_reach_the_points_that_asked() {
        let script = r#"echo '{"cpus": 3}'
n=0
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed 's/^{"id":\([0-9]*\).*/\1/')
  if [ "$id" = 1 ]; then echo "{\"id\": $id, \"error\": \"boom\"}"; else echo "{\"id\": $id, \"record\": {\"k\": $id}}"; fi
done"#;
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script);
        let b = RayBackend::start(cmd).unwrap();
        assert_eq!(b.cluster_cpus(), 3);
        let ps = points();
        assert_eq!(b.run(&ps[0]).unwrap(), serde_json::json!({"k": 0}));
        assert_eq!(b.run(&ps[1]).unwrap_err(), "boom");
        assert_eq!(b.run(&ps[0]).unwrap(), serde_json::json!({"k": 2}));
    }

    #[test]
    fn a_driver_that_cannot_reach_ray_fails_the_start_with_its_message() {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(r#"echo '{"error": "no Ray cluster at 1.2.3.4:6379"}'"#);
        let e = RayBackend::start(cmd).err().unwrap().to_string();
        assert!(e.contains("no Ray cluster at 1.2.3.4:6379"), "{e}");
    }

    #[test]
    fn points_fail_once_the_driver_exits() {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(r#"echo '{"cpus": 1}'; read -r line"#);
        let b = RayBackend::start(cmd).unwrap();
        let e = b.run(&points()[0]).unwrap_err();
        assert!(e.contains("exited"), "{e}");
        let e = b.run(&points()[1]).unwrap_err();
        assert!(e.contains("exited"), "{e}");
    }
}
