//! Selection: score maps, tune strings, and falling back to the next
//! candidate when the best one refuses the arguments.

use std::sync::Arc;

use ferrocoll::core::backend::{
    AlgInfo, CollTask, TlComponent, TlContext, TlContextParams, TlPeer, TlTeam, TlTeamFuture, TlTeamParams,
};
use ferrocoll::core::config::ConfigField;
use ferrocoll::core::score::{AlgId, MsgRange, Score, ScoreEntry};
use ferrocoll::{
    Coll, CollInit, CollType, CollTypeSet, Config, Context, ContextParams, Error, LibParams, MemType, ReduceOp, Result,
    Status, Team, TeamParams, ThreadOob,
};
use ferrocoll_tests::world;

/// A TL that offers allreduce with a high score and refuses every call.
struct Refuser;

static REFUSER_ALGS: [AlgInfo; 1] =
    [AlgInfo { coll: CollType::Allreduce, id: 0, name: "never", description: "refuses everything" }];

impl TlComponent for Refuser {
    fn name(&self) -> &'static str {
        "refuser"
    }
    fn description(&self) -> &'static str {
        "test TL that refuses every collective"
    }
    fn default_score(&self) -> Score {
        Score(1000)
    }
    fn config_fields(&self) -> Vec<ConfigField> {
        Vec::new()
    }
    fn algorithms(&self) -> &'static [AlgInfo] {
        &REFUSER_ALGS
    }
    fn context_create(&self, _: &TlContextParams<'_>) -> Result<Arc<dyn TlContext>> {
        Ok(Arc::new(RefuserContext))
    }
}

struct RefuserContext;

impl TlContext for RefuserContext {
    fn address(&self) -> Vec<u8> {
        Vec::new()
    }
    fn connect(&self, _: &[TlPeer]) -> Result<()> {
        Ok(())
    }
    fn progress(&self) -> Result<()> {
        Ok(())
    }
    fn team_create(&self, _: &TlTeamParams) -> Result<TlTeamFuture> {
        let t: Arc<dyn TlTeam> = Arc::new(RefuserTeam);
        Ok(Box::pin(std::future::ready(Ok(t))))
    }
    fn close(&self) {}
}

struct RefuserTeam;

impl TlTeam for RefuserTeam {
    fn colls(&self) -> CollTypeSet {
        [CollType::Allreduce].into_iter().collect()
    }
    fn mem_types(&self) -> &[MemType] {
        &[MemType::Host]
    }
    fn default_scores(&self) -> Vec<ScoreEntry> {
        vec![ScoreEntry {
            coll: CollType::Allreduce,
            mem: MemType::Host,
            range: MsgRange::ALL,
            score: Score(1000),
            alg: 0,
        }]
    }
    fn coll_init(&self, _: AlgId, init: &Arc<CollInit>) -> Result<Arc<dyn CollTask>> {
        Err(Error::not_supported(format!("refuser never runs {}", init.coll)))
    }
}

#[test]
fn a_refusing_candidate_falls_back_to_the_next() {
    let mut components = ferrocoll::default_components();
    components.tls.insert(0, Arc::new(Refuser));
    let lib = ferrocoll::Lib::with_components(LibParams::default(), components).expect("lib");
    let handles: Vec<_> = ThreadOob::group(2)
        .into_iter()
        .map(|oob| {
            let lib = lib.clone();
            std::thread::spawn(move || {
                let ctx = Context::new(&lib, ContextParams::with_oob(oob)).expect("ctx");
                let team = Team::create(&ctx, TeamParams::default()).expect("team");
                assert!(team.score_map().expect("map").contains("refuser/never:1000"));
                let src = vec![2i64; 5];
                let mut dst = vec![0i64; 5];
                let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).init(&team).expect("init");
                let selected = req.selected().to_string();
                req.run().expect("run");
                drop(req);
                assert_eq!(dst, vec![4; 5]);
                selected
            })
        })
        .collect();
    for h in handles {
        let selected = h.join().expect("rank");
        assert!(!selected.starts_with("refuser/"), "{selected}");
    }
}

#[test]
fn tune_strings_pick_and_disable_algorithms() {
    world::run(4, &Config::new(), |_team, ctx| {
        let pick = |tune: &str| {
            // The shm TL (which outscores p2p on one host) is off for these teams.
            let team = Team::create(ctx, TeamParams::default().set("TL_P2P_TUNE", tune).set("TL_SHM_TUNE", "0"))
                .expect("team");
            let src = vec![1u32; 200];
            let mut dst = vec![0u32; 200];
            let req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).init(&team);
            req.map(|r| r.selected().to_string())
        };
        assert_eq!(pick("allreduce:@ring").unwrap(), "p2p/ring");
        assert_eq!(pick("allreduce:0-1k:@2#allreduce:1k-inf:@knomial").unwrap(), "p2p/ring");
        assert_eq!(pick("allreduce:[1-3]:@ring").unwrap(), "p2p/knomial", "team size 4 is outside [1-3]");
        assert_eq!(pick("allreduce:[4]:@sra_knomial").unwrap(), "p2p/sra_knomial");
        let e = pick("allreduce:0").expect_err("allreduce is disabled");
        assert_eq!(e.status(), Status::NotSupported);
        assert!(e.to_string().contains("no algorithm supports allreduce"), "{e}");
        // UCC's variable name for its p2p TL is honoured too.
        let team =
            Team::create(ctx, TeamParams::default().set("TL_UCP_TUNE", "bcast:@sag_knomial").set("TL_SHM_TUNE", "0"))
                .expect("team");
        let mut b = vec![0u8; 10];
        assert_eq!(Coll::bcast(&mut b, 0).init(&team).expect("init").selected(), "p2p/sag_knomial");
        // Under UCC's name, a string written for UCC's TL/UCP (UCC's MPI test
        // sets `@onesided`, which ferrocoll's p2p lacks) is used as far as it
        // applies, as UCC goes on past tune input it cannot use; an
        // unreadable one is ignored. Under ferrocoll's own name, both are errors.
        let ucp = |tune: &str| {
            Team::create(ctx, TeamParams::default().set("TL_UCP_TUNE", tune).set("TL_SHM_TUNE", "0")).expect("team")
        };
        let team = ucp("alltoall:0-inf:@onesided#alltoallv:0-inf:@onesided#bcast:@sag_knomial");
        assert_eq!(Coll::bcast(&mut b, 0).init(&team).expect("init").selected(), "p2p/sag_knomial");
        let (src, mut dst) = (vec![1u8; 8], vec![0u8; 8]);
        assert!(
            Coll::alltoall(&src, &mut dst).init(&team).expect("alltoall as if untuned").selected().starts_with("p2p/")
        );
        let team = ucp("bcast:@sag_knomial:not-a-score");
        assert!(Coll::bcast(&mut b, 0).init(&team).is_ok(), "an unreadable UCC string leaves the defaults");
        for bad in ["alltoall:0-inf:@onesided", "bcast:@sag_knomial:not-a-score"] {
            let e = Team::create(ctx, TeamParams::default().set("TL_P2P_TUNE", bad).set("TL_SHM_TUNE", "0"))
                .err()
                .unwrap_or_else(|| panic!("UCC_TL_P2P_TUNE={bad} is refused"));
            assert!(e.to_string().contains("UCC_TL_P2P_TUNE"), "{e}");
        }
        // UCC reads `UCC_TL_SHM_TUNE` too, for its own TL/SHM (whose
        // algorithms have other names), and goes on past what its TL cannot
        // use: so does ferrocoll's shm, applying the tokens it can.
        let shm = |tune: &str| Team::create(ctx, TeamParams::default().set("TL_SHM_TUNE", tune));
        let team = shm("bcast:0-inf:@ww#allreduce:0-inf:@rsag").expect("a UCC TL/SHM token is skipped");
        let (src, mut dst) = (vec![1u32; 200], vec![0u32; 200]);
        assert_eq!(Coll::allreduce(&src, &mut dst, ReduceOp::Sum).init(&team).expect("init").selected(), "shm/rsag");
        assert!(Coll::bcast(&mut b, 0).init(&team).expect("bcast as if untuned").selected().starts_with("shm/"));
        let team = shm("bcast:@staged:not-a-score").expect("an unreadable string leaves the defaults");
        assert!(Coll::bcast(&mut b, 0).init(&team).is_ok());
    });
}

#[test]
fn a_team_no_tl_can_serve_is_an_error() {
    let mut c = Config::new();
    c.set("TLS", "self");
    let lib = ferrocoll::Lib::with_params(LibParams { config: c, ..LibParams::default() }).expect("lib");
    let handles: Vec<_> = ThreadOob::group(2)
        .into_iter()
        .map(|oob| {
            let lib = lib.clone();
            std::thread::spawn(move || {
                let ctx = Context::new(&lib, ContextParams::with_oob(oob)).expect("ctx");
                Team::create(&ctx, TeamParams::default()).err().map(|e| e.to_string())
            })
        })
        .collect();
    for h in handles {
        let e = h.join().expect("rank").expect("no TL serves two ranks with UCC_TLS=self");
        assert!(e.contains("no transport layer can serve"), "{e}");
    }
}
