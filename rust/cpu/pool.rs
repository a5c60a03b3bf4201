//! A persistent thread pool that spins briefly, then parks. One job at a time:
//! `run(n_tasks, f)` calls `f(i)` for every i in 0..n_tasks across the caller and
//! the workers, and returns when all are done. No per-call thread spawning.
//!
//! A task that panics does not take a worker down or leave the caller waiting: the
//! panic is caught where it happens, every thread leaves the job as usual, and `run`
//! then panics on the caller's thread with the first message (so the engine loop's own
//! catch turns it into that step's error).
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins before parking.
const SPIN: Duration = Duration::from_micros(300);

type Job = *const (dyn Fn(usize) + Sync);

struct Shared {
    /// The current job (valid while `remaining > 0` for this generation).
    job: Mutex<Option<SendJob>>,
    generation: AtomicUsize,
    next: AtomicUsize,
    n_tasks: AtomicUsize,
    /// Workers still inside the current job.
    active: AtomicUsize,
    park_lock: Mutex<()>,
    park_cv: Condvar,
    shutdown: AtomicBool,
    /// The first panic of the current job (its message).
    panic: Mutex<Option<String>>,
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "a panic with no message".into())
}

/// Run tasks of the current job until none is left, catching a panic (recorded once).
fn drain(s: &Shared, n: usize, f: &(dyn Fn(usize) + Sync)) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loop {
        let i = s.next.fetch_add(1, Ordering::AcqRel);
        if i >= n {
            break;
        }
        f(i);
    }));
    if let Err(p) = r {
        // the other threads stop taking tasks of this job
        s.next.store(usize::MAX / 2, Ordering::Release);
        s.panic.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(|| panic_message(&*p));
    }
}

#[derive(Clone, Copy)]
struct SendJob(Job);
// SAFETY: the pointee is `Sync` and outlives every use: `run` does not return
// until all workers have finished with it (see `active`).
unsafe impl Send for SendJob {}

pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    n_threads: usize,
    /// Serialises callers: one job at a time.
    run_lock: Mutex<()>,
}

impl ThreadPool {
    /// A pool of `n_threads` total (the calling thread counts as one).
    pub fn new(n_threads: usize) -> ThreadPool {
        let n_threads = n_threads.max(1);
        let shared = Arc::new(Shared {
            job: Mutex::new(None),
            generation: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            n_tasks: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            park_lock: Mutex::new(()),
            park_cv: Condvar::new(),
            shutdown: AtomicBool::new(false),
            panic: Mutex::new(None),
        });
        let workers = (1..n_threads)
            .filter_map(|i| {
                let s = shared.clone();
                // The worker starts from generation 0 (not whatever it reads when it first runs):
                // a job posted before the thread is scheduled must still be seen as new.
                std::thread::Builder::new().name(format!("llamars-cpu-{i}")).spawn(move || worker(s, 0)).ok()
            })
            .collect::<Vec<_>>();
        let n_threads = workers.len() + 1;
        ThreadPool { shared, workers, n_threads, run_lock: Mutex::new(()) }
    }

    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// `f(row)` on every `width`-wide row of `data`, the rows split over the threads (row
    /// ops whose result does not depend on the split: norms, activations).
    pub fn rows_mut<F: Fn(&mut [f32]) + Sync>(&self, data: &mut [f32], width: usize, f: F) {
        if width == 0 {
            return;
        }
        let n_rows = data.len() / width;
        // at least 16 rows per task: a task costs a hand-off
        let n_tasks = (n_rows / 16).clamp(1, 2 * self.n_threads);
        let per = n_rows.div_ceil(n_tasks);
        let chunks: Vec<std::sync::Mutex<&mut [f32]>> = data[..n_rows * width].chunks_mut(per * width).map(std::sync::Mutex::new).collect();
        self.run(chunks.len(), |i| {
            let mut c = chunks[i].lock().unwrap_or_else(|e| e.into_inner());
            c.chunks_exact_mut(width).for_each(&f);
        });
    }

    /// Run `f(i)` for i in 0..n_tasks on all threads; returns when every call is done.
    pub fn run<F: Fn(usize) + Sync>(&self, n_tasks: usize, f: F) {
        if n_tasks == 0 {
            return;
        }
        if self.workers.is_empty() || n_tasks == 1 {
            for i in 0..n_tasks {
                f(i);
            }
            return;
        }
        let _guard = self.run_lock.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        let fref: &(dyn Fn(usize) + Sync) = &f;
        // SAFETY: erase the lifetime; the pointer is cleared and all workers have left
        // the job before this function returns, so it never outlives `f`.
        let job: Job = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(fref) };
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(SendJob(job));
        s.n_tasks.store(n_tasks, Ordering::Relaxed);
        s.next.store(0, Ordering::Relaxed);
        s.active.store(self.workers.len(), Ordering::Release);
        s.generation.fetch_add(1, Ordering::AcqRel);
        {
            let _l = s.park_lock.lock().unwrap_or_else(|e| e.into_inner());
            s.park_cv.notify_all();
        }
        drain(s, n_tasks, fref);
        // Wait for the workers: spin briefly, then yield so a descheduled worker on an
        // oversubscribed machine gets the core back instead of being starved by us.
        let mut spins = 0u32;
        while s.active.load(Ordering::Acquire) != 0 {
            if spins < 2000 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if let Some(msg) = s.panic.lock().unwrap_or_else(|e| e.into_inner()).take() {
            panic!("{msg}");
        }
    }
}

fn worker(s: Arc<Shared>, mut seen: usize) {
    loop {
        // Wait for a new generation: spin, then park.
        let start = Instant::now();
        let mut spins = 0u32;
        let mut spinning = true;
        loop {
            if s.shutdown.load(Ordering::Acquire) {
                return;
            }
            let g = s.generation.load(Ordering::Acquire);
            if g != seen {
                seen = g;
                break;
            }
            // Read the clock only every 256 spins: a clock read per spin costs more than
            // the spin itself and shows up in decode profiles.
            if spinning {
                spins = spins.wrapping_add(1);
                if !spins.is_multiple_of(256) || start.elapsed() < SPIN {
                    std::hint::spin_loop();
                    continue;
                }
                spinning = false;
            }
            let l = s.park_lock.lock().unwrap_or_else(|e| e.into_inner());
            if s.generation.load(Ordering::Acquire) == seen && !s.shutdown.load(Ordering::Acquire) {
                let _l = s.park_cv.wait_timeout(l, Duration::from_millis(100)).unwrap_or_else(|e| e.into_inner());
            }
        }
        let job = *s.job.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(SendJob(job)) = job {
            let n = s.n_tasks.load(Ordering::Acquire);
            // SAFETY: `run` keeps the closure alive until `active` drops to zero.
            drain(&s, n, unsafe { &*job });
        }
        s.active.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        {
            let _l = self.shared.park_lock.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.park_cv.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Physical cores (hyper-threads not counted) as llama.cpp's default thread count.
pub fn default_threads() -> usize {
    let logical = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    #[cfg(target_os = "linux")]
    {
        if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
            let mut cores = std::collections::HashSet::new();
            let (mut phys, mut core) = (None, None);
            for line in info.lines() {
                if let Some(v) = line.strip_prefix("physical id") {
                    phys = v.trim_start_matches([' ', '\t', ':']).trim().parse::<u32>().ok();
                } else if let Some(v) = line.strip_prefix("core id") {
                    core = v.trim_start_matches([' ', '\t', ':']).trim().parse::<u32>().ok();
                } else if line.trim().is_empty() {
                    if let (Some(p), Some(c)) = (phys, core) {
                        cores.insert((p, c));
                    }
                    phys = None;
                    core = None;
                }
            }
            if !cores.is_empty() && cores.len() <= logical {
                return cores.len();
            }
        }
    }
    logical
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn runs_every_task_once() {
        let pool = ThreadPool::new(3);
        for round in 0..200 {
            let n = 1 + round % 37;
            let sum = AtomicU64::new(0);
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            pool.run(n, |i| {
                sum.fetch_add(i as u64, Ordering::Relaxed);
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(sum.load(Ordering::Relaxed), (n * (n - 1) / 2) as u64);
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
    }

    #[test]
    fn job_posted_before_workers_start_is_not_lost() {
        for _ in 0..50 {
            let pool = ThreadPool::new(2);
            let c = AtomicUsize::new(0);
            pool.run(4, |_| {
                c.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(c.load(Ordering::Relaxed), 4);
        }
    }

    #[test]
    fn a_panicking_task_fails_the_run_not_the_pool() {
        let pool = ThreadPool::new(3);
        for round in 0..4 {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.run(64, |i| {
                    if i == 17 + round {
                        panic!("task {i} broke");
                    }
                })
            }));
            let msg = r.err().and_then(|p| p.downcast_ref::<String>().cloned()).unwrap_or_default();
            assert!(msg.contains("broke"), "{msg}");
            // the pool still runs every task of the next job
            let n = AtomicUsize::new(0);
            pool.run(100, |_| {
                n.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(n.load(Ordering::Relaxed), 100);
        }
    }

    #[test]
    fn parks_and_wakes() {
        let pool = ThreadPool::new(2);
        std::thread::sleep(Duration::from_millis(5));
        let c = AtomicUsize::new(0);
        pool.run(8, |_| {
            c.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(c.load(Ordering::Relaxed), 8);
    }
}
