//! Diagnosis: `UCC_COLL_TRACE` says which TL and algorithm ran and why, and
//! the watchdog names a collective that is stuck and the rank it waits for,
//! and the flight recorder keeps each team's last collectives.
//! Log lines are captured through `log::set_sink` (one test binary, so the
//! sink is not disturbed by other tests' processes).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrocoll::core::log::{self, Level};
use ferrocoll::{Coll, Config, ReduceOp};
use ferrocoll_tests::world;

fn capture() -> Arc<Mutex<Vec<(Level, String)>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l = lines.clone();
    log::set_sink(Some(Arc::new(move |lvl, line: &str| l.lock().unwrap().push((lvl, line.to_string())))));
    lines
}

#[test]
fn coll_trace_and_watchdog() {
    let lines = capture();

    // 1. The trace names the selection of every collective on rank 0.
    let mut c = Config::new();
    c.set("COLL_TRACE", "info");
    c.set("TLS", "p2p,self");
    c.set("TL_P2P_TUNE", "allreduce:0-1k:@ring");
    world::run(3, &c, |team, _| {
        let src = vec![1.0f32; 16];
        let mut dst = vec![0.0f32; 16];
        Coll::allreduce(&src, &mut dst, ReduceOp::Sum).run(team).expect("small");
        let big = vec![1.0f32; 4096];
        let mut out = vec![0.0f32; 4096];
        Coll::allreduce(&big, &mut out, ReduceOp::Sum).run(team).expect("large");
    });
    let text: Vec<String> = lines.lock().unwrap().iter().map(|(_, l)| l.clone()).collect();
    let small = text
        .iter()
        .find(|l| l.contains("coll_init: allreduce") && l.contains("count 16 "))
        .expect("trace of the small one");
    assert!(small.contains("p2p/ring") && small.contains("score 10 in range 0-1K"), "{small}");
    let large = text
        .iter()
        .find(|l| l.contains("coll_init: allreduce") && l.contains("count 4096 "))
        .expect("trace of the large one");
    assert!(large.contains("p2p/sra_knomial"), "{large}");
    // At info level only team rank 0 traces.
    assert_eq!(text.iter().filter(|l| l.contains("coll_init")).count(), 2, "{text:?}");
    lines.lock().unwrap().clear();

    // 2. The watchdog warns about a collective that makes no progress, naming the rank it waits for.
    let mut c = Config::new();
    c.set("WATCHDOG_TIMEOUT", "100ms");
    c.set("TLS", "p2p,self");
    world::run(2, &c, |team, _| {
        if team.rank() == 0 {
            let mut b = vec![0u8; 8];
            let r = Coll::bcast(&mut b, 1).timeout(Duration::from_millis(600)).run(team);
            assert!(r.is_err(), "rank 1 never joins");
        } else {
            std::thread::sleep(Duration::from_millis(800));
        }
    });
    let warned = lines.lock().unwrap().iter().any(|(lvl, l)| {
        *lvl == Level::Warn && l.contains("watchdog: bcast seq 0") && l.contains("waiting for a message from rank 1")
    });
    // The watchdog and the timeout also dump the team's flight record (to the
    // log, with no FERROCOLL_FLIGHT_RECORDER_DIR): the collective, in
    // progress, and the rank it waits for.
    let dumps: Vec<String> = lines
        .lock()
        .unwrap()
        .iter()
        .filter(|(lvl, l)| *lvl == Level::Warn && l.contains("flight recorder ("))
        .map(|(_, l)| l.clone())
        .collect();
    // 3. A collective whose caller learns its end by a callback (as a C
    // caller does, from a status code) that fails says why in the log.
    lines.lock().unwrap().clear();
    let mut c = Config::new();
    c.set("TLS", "p2p,self");
    world::run(2, &c, |team, _| {
        if team.rank() == 0 {
            let mut b = vec![0u8; 8];
            let mut req = Coll::bcast(&mut b, 1).timeout(Duration::from_millis(200)).init(team).expect("init");
            req.set_completion(Arc::new(|_| {}));
            req.post().expect("post");
            assert!(req.wait().is_err(), "rank 1 never joins");
        } else {
            std::thread::sleep(Duration::from_millis(400));
        }
    });
    let said = lines.lock().unwrap().iter().any(|(lvl, l)| {
        *lvl == Level::Error
            && l.contains("collective failed: ")
            && l.contains("bcast seq 0")
            && l.contains("timed out")
    });
    log::set_sink(None);
    assert!(said, "no error line for the failed collective in {:?}", lines.lock().unwrap());
    assert!(warned, "no watchdog warning in {:?}", lines.lock().unwrap());
    // A dump covers every team of the process (rank 1's, this test's, others'): take rank 0's of this team.
    let on = |why: &str| {
        dumps.iter().find(|l| l.contains(why) && l.contains(r#""rank":0,"#) && l.contains(r#""coll":"bcast""#)).cloned()
    };
    let watchdog = on("(watchdog of bcast seq 0").unwrap_or_else(|| panic!("no watchdog dump in {dumps:?}"));
    assert!(watchdog.contains(r#""state":"in_progress","waiting_for":1"#), "{watchdog}");
    let timeout = on("(timeout of bcast seq 0").unwrap_or_else(|| panic!("no timeout dump in {dumps:?}"));
    assert!(timeout.contains(r#""coll":"bcast""#) && timeout.contains("timed out after"), "{timeout}");
}

#[test]
fn the_flight_record_says_what_each_collective_did_and_waits_for() {
    let mut c = Config::new();
    c.set("TLS", "p2p,self");
    let go = Arc::new(std::sync::Barrier::new(2));
    world::run(2, &c, move |team, _| {
        let mut b = vec![1u8; 8];
        Coll::bcast(&mut b, 0).run(team).expect("bcast");
        if team.rank() == 0 {
            let src = vec![1.0f32; 4];
            let mut dst = vec![0.0f32; 4];
            let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).init(team).expect("init");
            req.post().expect("post");
            for _ in 0..100 {
                team.progress().expect("progress");
            }
            let rec: serde_json::Value = serde_json::from_str(&team.flight_record()).expect("JSON");
            go.wait();
            req.wait().expect("allreduce");
            let colls = rec["collectives"].as_array().expect("collectives");
            assert_eq!((rec["rank"].as_u64(), rec["size"].as_u64()), (Some(0), Some(2)), "{rec}");
            assert_eq!((colls[0]["coll"].as_str(), colls[0]["state"].as_str()), (Some("bcast"), Some("ok")), "{rec}");
            let a = &colls[1];
            assert_eq!((a["seq"].as_u64(), a["state"].as_str()), (Some(1), Some("in_progress")), "{rec}");
            assert_eq!(a["waiting_for"].as_u64(), Some(1), "{rec}");
            assert!(a["call"].as_str().is_some_and(|c| c.contains("allreduce sum count 4 float32")), "{rec}");
        } else {
            go.wait();
            let src = vec![1.0f32; 4];
            let mut dst = vec![0.0f32; 4];
            Coll::allreduce(&src, &mut dst, ReduceOp::Sum).run(team).expect("allreduce");
        }
    });
}
