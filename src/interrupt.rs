//! SIGINT, SIGTERM and SIGHUP, the same way for every command.
//!
//! - The first interrupt stops the run gently: no new case starts, shrinks
//!   stop at their smallest failing case so far, the cases in flight finish,
//!   and the report is written.
//! - Signals within [`WINDOW`] of the last one taken are the same
//!   interrupt: `timeout -s INT` signals the command and then its whole
//!   process group, so bitparity gets the signal twice at once.
//! - A second interrupt stops at once what is waiting: every external
//!   subject's processes are killed, the cases in flight are dropped (not
//!   counted: a case cut off is neither passed nor failed), and the report
//!   of what was judged is written.
//! - A third ends the process at once (exit 130), without a report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Signals within this long of the first are the same interrupt.
pub const WINDOW: Duration = Duration::from_secs(1);

struct State {
    /// When the last interrupt was taken.
    last: Option<Instant>,
    count: u32,
}

static STATE: Mutex<State> = Mutex::new(State { last: None, count: 0 });
static HARD: AtomicBool = AtomicBool::new(false);

/// Whether a second interrupt asked to stop at once: work in flight is
/// dropped, not counted.
pub fn hard_stop() -> bool {
    HARD.load(Ordering::SeqCst)
}

/// What an interrupt does: `first` is said on stderr at the first one
/// (`None`: nothing); the returned flag is set by it.
pub fn install(first: Option<&'static str>) -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    let _ = ctrlc::set_handler(move || on_signal(&set, first));
    flag
}

fn on_signal(flag: &AtomicBool, first: Option<&str>) {
    let now = Instant::now();
    let count = {
        let mut st = STATE.lock().unwrap_or_else(|e| e.into_inner());
        if st.last.is_some_and(|t| now.duration_since(t) < WINDOW) {
            return;
        }
        st.last = Some(now);
        st.count += 1;
        st.count
    };
    match count {
        1 => {
            flag.store(true, Ordering::SeqCst);
            if let Some(m) = first {
                eprintln!("\n{m}");
            }
        }
        2 => {
            HARD.store(true, Ordering::SeqCst);
            flag.store(true, Ordering::SeqCst);
            eprintln!("\ninterrupted again: stopping the external subjects and the cases in flight (once more to exit at once)");
            crate::exec::kill_all();
        }
        _ => {
            crate::exec::kill_all();
            std::process::exit(130);
        }
    }
}
