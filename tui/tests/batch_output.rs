//! `nfsdtop -b` text and CSV, byte for byte, for a scenario small enough
//! to work out by hand; and the flags that only mean something with -b.

use std::path::PathBuf;
use std::process::{Command, Output};

/// One nfsd thread, 10 ms a request, round-robin across two backlogged
/// peers: 10.0.0.10 with one connection and requests of its own sizes
/// (100 bytes in, 1000 out), 10.0.0.2 with two and the default sizes (a
/// 4 KiB read: 200 in, 4296 out).
const TINY: &str = r#"
name = "tiny"
threads = 1
service_ms = 10.0
jitter = 0.0
policy = "rr-peer"

[[client]]
address = "10.0.0.10"
connections = 1
inflight = 2
request_bytes = 100
reply_bytes = 1000

[[client]]
address = "10.0.0.2"
connections = 2
inflight = 2
"#;

fn scenario(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nfsdtop-batch-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("tiny.toml");
    std::fs::write(&p, TINY).unwrap();
    p
}

fn nfsdtop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(args)
        .output()
        .expect("run nfsdtop")
}

/// Two one-second snapshots of TINY, simulated as fast as possible.
fn run(tag: &str, extra: &[&str]) -> String {
    let file = scenario(tag);
    let path = file.to_str().unwrap();
    let mut args = vec!["--demo", path, "-b", "-n", "2", "-d", "1", "--speed", "0"];
    args.extend_from_slice(extra);
    let o = nfsdtop(&args);
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

// By hand, for the second second (the first has the start-up: 10.0.0.2's
// first request comes after 10.0.0.10's, so the first dispatch goes to
// 10.0.0.10 alone, which earns it in full: 51 dispatches against 49,
// entitled 50.5 against 49.5):
// - one thread at 10 ms a request: 100 dispatches a second, 200 since
//   the start;
// - round-robin across the two peers, both always backlogged: 50 each,
//   share 50.0%, fair share 50.0% (each earns 1/2 of every dispatch),
//   ratio 1.00, thread time 50.0% (equal service times); cumulative
//   51 + 50 = 101 for 10.0.0.10, 49 + 50 = 99 for 10.0.0.2, entitled
//   50.5 + 50 = 100.5 and 49.5 + 50 = 99.5;
// - equal rows go by address value: 10.0.0.2 before 10.0.0.10;
// - a transport goes back on the queue when a thread takes a request
//   and another is waiting, else when the next request arrives (reply
//   and request: 0.1 ms after the service ends). 10.0.0.10's one
//   connection holds both its requests, so it is queued again at once
//   and waits for 10.0.0.2's turn and its own: 20 ms, in the histogram
//   bucket [16384, 20480) us, midpoint 18431.5 us, shown 18ms.
//   10.0.0.2's two connections hold one request each and take turns
//   within its turns: each is queued again 10.1 ms after it was taken
//   and taken 40 ms after: a 29.9 ms wait, bucket [28672, 32768) us,
//   midpoint 30719.5, shown 31ms;
// - over all 100 dispatches, 50 waits of each: p50 the 50th, 18ms; p99
//   31ms;
// - 3 transports in all (the CSV total row's connections);
// - requests count when they finish: dispatch k (0-based) starts at
//   0.05 ms + 10 ms·k and ends 10 ms later. 10.0.0.10 has dispatch 0 and
//   1 (its second request was queued before 10.0.0.2's first) and then
//   every odd one: 51 of the first 100, 50 of the next. The 200th (k =
//   199, 10.0.0.10's) is still in service at 2 s: 100 requests answered
//   for 10.0.0.10, 99 for 10.0.0.2. In the second second k = 99..198
//   end, 50 of each: 50.0 ops/s each, 100 in all;
// - bytes: requests × size. 10.0.0.10: 100 × 100 = 10000 in, 100 × 1000
//   = 100000 out, 50 × 100 = 5000 B/s in (4.88KiB/s), 50000 out
//   (48.8KiB/s); 10.0.0.2: 99 × 200 = 19800 in, 99 × 4296 = 425304 out,
//   10000 B/s in (9.77KiB/s), 214800 out (209.8 KiB/s: 210KiB/s); the
//   server: 15000 B/s in, 264800 out;
// - requests in flight: each peer's 50 requests of 10 ms in the second
//   second are 0.5 s of thread time, 0.50 on average; the server's 1.00
//   (its one thread, always busy).
// - in flight at enqueue: 10.0.0.10's one connection is queued again
//   as its thread takes one of its two requests, the other in flight:
//   every enqueue at depth 1 (share at 0: 0, mean 1); 10.0.0.2's each
//   hold one request, queued when it arrives with none in flight: all at
//   depth 0 (share 1, mean 0); the deepest enqueue of the interval: 1
//   and 0; the total row has none of its own.
// - execution time a request: every request of the tiny scenario takes
//   its service time, 10 ms (10000.0 us), so each peer's and the
//   server's mean is that.
const TEXT_SECOND: &str = "\
nfsdtop - demo tiny policy=rr-peer threads=1 service=10ms (demo) wait source: enqueue-dequeue - interval 1.00s
dispatches 200 since start, 100/s  backlogged 2  jain 1.000  wait of all dispatches p50 18ms p99 31ms  lost 0
PEER      CLASS      CONN   DISP/S  SHARE   FAIR  RATIO  WAIT_P50  WAIT_P99   EXEC    OPS/S       IN/S      OUT/S  INFLT   EXEC/OP
10.0.0.2  10.0.0.2      2     50.0  50.0%  50.0%   1.00      31ms      31ms  50.0%     50.0  9.77KiB/s   210KiB/s   0.50      10ms
10.0.0.10 10.0.0.10     1     50.0  50.0%  50.0%   1.00      18ms      18ms  50.0%     50.0  4.88KiB/s  48.8KiB/s   0.50      10ms
";

#[test]
fn batch_text_of_a_hand_computed_scenario() {
    let out = run("text", &[]);
    let blocks: Vec<&str> = out.split("\n\n").collect();
    assert_eq!(
        blocks.len(),
        3,
        "two blocks, each with a blank line:\n{out}"
    );
    assert_eq!(format!("{}\n", blocks[1]), TEXT_SECOND, "{out}");
    // Every name whole, however long (no `~`).
    assert!(!out.contains('~'), "{out}");

    // By class: each peer is its own class (no class map); the second
    // column is the peer count, not the class again.
    let out = run("class", &["--group", "class"]);
    let second = out.split("\n\n").nth(1).unwrap();
    let lines: Vec<&str> = second.lines().collect();
    assert_eq!(
        lines[2],
        "CLASS     PEERS  CONN   DISP/S  SHARE   FAIR  RATIO  WAIT_P50  WAIT_P99   EXEC    OPS/S       IN/S      OUT/S  INFLT   EXEC/OP"
    );
    assert_eq!(
        lines[3],
        "10.0.0.2      1     2     50.0  50.0%  50.0%   1.00      31ms      31ms  50.0%     50.0  9.77KiB/s   210KiB/s   0.50      10ms"
    );
}

#[test]
fn batch_csv_of_a_hand_computed_scenario() {
    let out = run("csv", &["--format", "csv"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "time,interval_s,source,kind,name,class,connections,dispatches_total,dispatch_rate,\
         share,fair_share,entitled_total,fairness,wait_p50_us,wait_p99_us,exec_share,\
         requests_total,request_rate,bytes_in_total,bytes_out_total,bytes_in_rate,bytes_out_rate,\
         client_names,hostname,inflight_mean,depth0_share,enqueue_depth_mean,enqueue_depth_max,exec_mean_us"
    );
    // Header, then (2 peers + the total row) per iteration.
    assert_eq!(lines.len(), 7, "{out}");
    // The time is the clock's: one second apart, the same on every row
    // of an iteration.
    let time = |l: &str| -> f64 { l.split(',').next().unwrap().parse().unwrap() };
    assert!(
        lines[1..4].iter().all(|l| time(l) == time(lines[1])),
        "{out}"
    );
    assert!(
        (time(lines[4]) - time(lines[1]) - 1.0).abs() < 1e-6,
        "{out}"
    );
    let rest: Vec<&str> = lines[4..]
        .iter()
        .map(|l| l.split_once(',').unwrap().1)
        .collect();
    // The numbers worked out above; the total row: 3 transports, 200
    // dispatches, share 1, waits of every dispatch, no entitlement or
    // ratio of its own, the rates of every peer and no workload totals.
    assert_eq!(
        rest,
        [
            "1.000,demo,peer,10.0.0.2,10.0.0.2,2,99,50.000,0.500000,0.500000,99.500,1.0000,30719.5,30719.5,0.500000,\
             99,50.000,19800,425304,10000.000,214800.000,,,0.500,1.000000,0.000,0,10000.0",
            "1.000,demo,peer,10.0.0.10,10.0.0.10,1,101,50.000,0.500000,0.500000,100.500,1.0000,18431.5,18431.5,0.500000,\
             100,50.000,10000,100000,5000.000,50000.000,,,0.500,0.000000,1.000,1,10000.0",
            "1.000,demo,total,total,,3,200,100.000,1.000000,1.000000,,,18431.5,30719.5,1.000000,\
             ,100.000,,,15000.000,264800.000,,,1.000,,,,10000.0",
        ],
        "{out}"
    );
}

#[test]
fn iterations_and_format_need_batch_mode() {
    for args in [&["--demo", "-n", "1"][..], &["--demo", "--format", "csv"]] {
        let o = nfsdtop(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("--batch"), "{args:?}: {e}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// The JSON record's `server`: TINY's one thread, busy all the time
/// (100 requests of 10 ms in each second: 1.0 busy thread), in its one
/// pool (as busy as the server), all peers in one network namespace.
#[test]
fn json_server_has_the_scenarios_threads_and_the_busy_threads_by_hand() {
    let out = run("server", &["--format", "json"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let v: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
    let server = &v["server"];
    assert_eq!(server["threads"], 1, "{server}");
    let busy = server["busy_threads"].as_f64().expect("busy threads known");
    assert!((busy - 1.0).abs() <= 0.011, "busy {busy}, by hand 1.0");
    assert_eq!(
        server["pools"],
        serde_json::json!([{"pool": 0, "threads": 1, "busy_threads": server["busy_threads"]}])
    );
    assert_eq!(
        server["netns"].as_array().map(Vec::len),
        Some(1),
        "{server}"
    );
}

/// The JSON record's workload fields for TINY, by hand (see above): the
/// requests answered by 2 s, and bytes = requests × the client's sizes.
#[test]
fn json_bytes_are_requests_times_the_scenarios_sizes() {
    let out = run("bytes", &["--format", "json"]);
    let last: serde_json::Value = serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
    let entity = |name: &str| {
        last["entities"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {last}"))
    };
    for (name, requests, size_in, size_out) in
        [("10.0.0.10", 100, 100, 1000), ("10.0.0.2", 99, 200, 4296)]
    {
        let e = entity(name);
        assert_eq!(e["requests"], requests, "{e}");
        assert_eq!(e["request_rate"], 50.0, "{e}");
        assert_eq!(e["bytes_in"], requests * size_in, "{e}");
        assert_eq!(e["bytes_out"], requests * size_out, "{e}");
        assert_eq!(e["bytes_in_rate"], 50.0 * size_in as f64, "{e}");
        assert_eq!(e["bytes_out_rate"], 50.0 * size_out as f64, "{e}");
    }
}
