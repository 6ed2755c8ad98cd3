//! Unit tests of the launchers' variables: every family, precedence,
//! contradictions, missing values and defaults. Pure: no process environment.

use ferrocoll_core::Status;
use proptest::prelude::*;

use super::*;

fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn ok(pairs: &[(&str, &str)]) -> Launch {
    match parse(&vars(pairs)) {
        Ok(l) => l,
        Err(e) => panic!("{pairs:?}: {e}"),
    }
}

fn err(pairs: &[(&str, &str)]) -> Error {
    match parse(&vars(pairs)) {
        Ok(l) => panic!("{pairs:?} parsed to {l:?}"),
        Err(e) => e,
    }
}

const TORCH: &[(&str, &str)] = &[
    ("RANK", "3"),
    ("WORLD_SIZE", "8"),
    ("LOCAL_RANK", "1"),
    ("LOCAL_WORLD_SIZE", "2"),
    ("MASTER_ADDR", "10.0.0.1"),
    ("MASTER_PORT", "29500"),
    ("FERROCOLL_JOB_TOKEN", "s3cret"),
];

#[test]
fn torchrun_and_ferrocoll_run() {
    let l = ok(TORCH);
    assert_eq!(
        l.params,
        TcpOobParams {
            rank: 3,
            size: 8,
            master_addr: "10.0.0.1".into(),
            master_port: 29500,
            token: "s3cret".into(),
            connect_timeout: Duration::from_secs(120),
        }
    );
    assert_eq!((l.local_rank, l.local_size), (Some(1), Some(2)));
    assert_eq!((l.launcher, l.token), ("torchrun/ferrocoll-run", TokenSource::Explicit));
    assert!(l.notes.is_empty());
}

#[test]
fn torchrun_run_id_names_the_job_unless_it_is_the_default() {
    let mut v: Vec<_> = TORCH.iter().filter(|(k, _)| *k != "FERROCOLL_JOB_TOKEN").copied().collect();
    assert_eq!(ok(&v).token, TokenSource::Missing);
    assert!(ok(&v).params.token.is_empty());
    v.push(("TORCHELASTIC_RUN_ID", "none"));
    assert_eq!(ok(&v).token, TokenSource::Missing);
    v.pop();
    v.push(("TORCHELASTIC_RUN_ID", "4f1c"));
    let l = ok(&v);
    assert_eq!(l.token, TokenSource::Derived("TORCHELASTIC_RUN_ID=4f1c".into()));
    assert!(l.params.token.starts_with("job-") && l.params.token.len() == 20, "{}", l.params.token);
}

#[test]
fn mpirun_on_one_host_defaults_address_and_port_from_the_job() {
    let rank = |r: &'static str| {
        ok(&[
            ("OMPI_COMM_WORLD_RANK", r),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", r),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
            ("OMPI_MCA_orte_hnp_uri", "3312844800.0;tcp://10.0.0.1:44111"),
        ])
    };
    let (a, b) = (rank("0"), rank("3"));
    assert_eq!((a.params.rank, b.params.rank, b.params.size), (0, 3, 4));
    assert_eq!(a.params.master_addr, "127.0.0.1");
    assert!((PORT_BASE..PORT_BASE + PORT_SPAN).contains(&a.params.master_port), "{}", a.params.master_port);
    // Every rank derives the same port and token.
    assert_eq!((a.params.master_port, &a.params.token), (b.params.master_port, &b.params.token));
    assert_eq!(a.token, TokenSource::Derived("OMPI_MCA_orte_hnp_uri=3312844800.0;tcp://10.0.0.1:44111".into()));
    assert_eq!(a.launcher, "mpirun (Open MPI)");
}

#[test]
fn open_mpi_5_names_the_job_by_its_pmix_namespace() {
    let l = ok(&[
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "2"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        ("PMIX_NAMESPACE", "prterun-host-1234@1"),
    ]);
    assert_eq!(l.token, TokenSource::Derived("PMIX_NAMESPACE=prterun-host-1234@1".into()));
    let other = ok(&[
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "2"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        ("PMIX_NAMESPACE", "prterun-host-1234@2"),
    ]);
    assert_ne!(l.params.token, other.params.token, "different jobs, different tokens");
}

#[test]
fn mpirun_on_several_hosts_needs_master_addr() {
    let e = err(&[
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        ("PMIX_NAMESPACE", "ns"),
    ]);
    assert_eq!(e.status(), Status::InvalidParam);
    let m = e.to_string();
    assert!(m.contains("MASTER_ADDR is not set") && m.contains("OMPI_COMM_WORLD_LOCAL_SIZE=2"), "{m}");
    assert!(m.contains("set MASTER_ADDR") && m.contains("MASTER_PORT"), "{m}");
    // With MASTER_ADDR, the port still comes from the job.
    let l = ok(&[
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        ("PMIX_NAMESPACE", "ns"),
        ("MASTER_ADDR", "node7"),
    ]);
    assert_eq!(l.params.master_addr, "node7");
}

#[test]
fn hydra_has_no_job_identifier() {
    let l = ok(&[("PMI_RANK", "2"), ("PMI_SIZE", "3"), ("MASTER_ADDR", "h0"), ("MASTER_PORT", "1234")]);
    assert_eq!((l.params.rank, l.params.size, l.launcher), (2, 3, "MPICH hydra"));
    assert_eq!((l.local_rank, l.local_size, l.token), (None, None, TokenSource::Missing));
    let e = err(&[("PMI_RANK", "2"), ("PMI_SIZE", "3")]);
    assert!(e.to_string().contains("not known to share one host (PMI_SIZE=3 and no local size)"), "{e}");
    let e = err(&[("PMI_RANK", "2"), ("PMI_SIZE", "3"), ("MPI_LOCALRANKID", "2"), ("MPI_LOCALNRANKS", "3")]);
    let m = e.to_string();
    assert!(m.contains("MASTER_PORT is not set") && m.contains("SLURM_JOB_ID+SLURM_STEP_ID"), "{m}");
    assert!(m.contains("OMPI_MCA_orte_hnp_uri") && m.contains("PMIX_NAMESPACE"), "{m}");
}

#[test]
fn srun_on_one_node() {
    let l = ok(&[
        ("SLURM_PROCID", "2"),
        ("SLURM_NTASKS", "4"),
        ("SLURM_LOCALID", "2"),
        ("SLURM_NNODES", "1"),
        ("SLURM_JOB_ID", "77"),
        ("SLURM_STEP_ID", "3"),
    ]);
    assert_eq!((l.params.rank, l.params.size, l.local_rank, l.local_size), (2, 4, Some(2), Some(4)));
    assert_eq!(l.params.master_addr, "127.0.0.1");
    assert_eq!(l.token, TokenSource::Derived("SLURM_JOB_ID=77, SLURM_STEP_ID=3".into()));
    let next_step = ok(&[
        ("SLURM_PROCID", "2"),
        ("SLURM_NTASKS", "4"),
        ("SLURM_NNODES", "1"),
        ("SLURM_JOB_ID", "77"),
        ("SLURM_STEP_ID", "4"),
    ]);
    assert_ne!(l.params.master_port, next_step.params.master_port);
    let batch = ok(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1"), ("SLURM_NNODES", "1"), ("SLURM_JOB_ID", "77")]);
    assert_eq!(batch.token, TokenSource::Derived("SLURM_JOB_ID=77".into()));
}

#[test]
fn srun_local_size_from_tasks_per_node() {
    let at = |node: &'static str| {
        ok(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "7"),
            ("SLURM_NODEID", node),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x3),1"),
            ("SLURM_TASKS_PER_NODE", "9"),
            ("MASTER_ADDR", "n0"),
            ("MASTER_PORT", "5000"),
        ])
        .local_size
    };
    assert_eq!((at("0"), at("2"), at("3"), at("4")), (Some(2), Some(2), Some(1), None));
    let e = err(&[
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "7"),
        ("SLURM_NODEID", "3"),
        ("SLURM_TASKS_PER_NODE", "2(x3),1"),
        ("SLURM_JOB_ID", "1"),
    ]);
    assert!(e.to_string().contains("SLURM_TASKS_PER_NODE=2(x3),1 at SLURM_NODEID=3 of SLURM_NTASKS=7"), "{e}");
}

#[test]
fn tasks_per_node_grammar() {
    assert_eq!(tasks_on_node("4", 0), Some(4));
    assert_eq!(tasks_on_node("4", 1), None);
    assert_eq!(tasks_on_node("3(x2),5,1(x3)", 1), Some(3));
    assert_eq!(tasks_on_node("3(x2),5,1(x3)", 2), Some(5));
    assert_eq!(tasks_on_node("3(x2),5,1(x3)", 5), Some(1));
    for bad in ["", "x", "2(x", "2(3)", "2(x-1)", "(x2)", "2,,3"] {
        assert_eq!(tasks_on_node(bad, 1), None, "{bad:?}");
    }
}

#[test]
fn families_that_agree_fill_each_others_gaps() {
    let l = ok(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "2"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        ("PMIX_NAMESPACE", "ns"),
    ]);
    assert_eq!(l.launcher, "torchrun/ferrocoll-run");
    assert_eq!((l.local_rank, l.local_size), (Some(1), Some(2)));
    assert_eq!(l.params.master_addr, "127.0.0.1");
    assert_eq!(l.token, TokenSource::Derived("PMIX_NAMESPACE=ns".into()));
}

#[test]
fn contradictions_name_both_sides() {
    let e = err(&[("RANK", "1"), ("WORLD_SIZE", "4"), ("OMPI_COMM_WORLD_RANK", "2"), ("OMPI_COMM_WORLD_SIZE", "4")]);
    assert_eq!(e.status(), Status::InvalidParam);
    assert!(e.to_string().contains("RANK=1 contradicts OMPI_COMM_WORLD_RANK=2"), "{e}");
    assert!(e.to_string().contains("torchrun/ferrocoll-run and mpirun (Open MPI) disagree"), "{e}");
    let e = err(&[("RANK", "1"), ("WORLD_SIZE", "4"), ("PMI_RANK", "1"), ("PMI_SIZE", "8")]);
    assert!(e.to_string().contains("WORLD_SIZE=4 contradicts PMI_SIZE=8"), "{e}");
    let e = err(&[
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        ("PMI_RANK", "1"),
        ("PMI_SIZE", "4"),
        ("MPI_LOCALRANKID", "0"),
    ]);
    assert!(e.to_string().contains("OMPI_COMM_WORLD_LOCAL_RANK=1 contradicts MPI_LOCALRANKID=0"), "{e}");
    // Slurm agreeing in rank and size is the same launch: its local size must agree too.
    let e = err(&[
        ("PMI_RANK", "1"),
        ("PMI_SIZE", "4"),
        ("MPI_LOCALNRANKS", "2"),
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "4"),
        ("SLURM_NNODES", "1"),
    ]);
    assert!(e.to_string().contains("MPI_LOCALNRANKS=2 contradicts SLURM_NNODES=1"), "{e}");
}

#[test]
fn an_outer_slurm_launch_is_ignored() {
    // torchrun on each of 2 nodes, started by srun: 8 workers, 2 Slurm tasks.
    let mut v = TORCH.to_vec();
    v.extend([("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2"), ("SLURM_JOB_ID", "9"), ("SLURM_STEP_ID", "0")]);
    let l = ok(&v);
    assert_eq!((l.params.rank, l.params.size, l.launcher), (3, 8, "torchrun/ferrocoll-run"));
    assert_eq!(l.notes.len(), 1, "{:?}", l.notes);
    assert!(l.notes[0].contains("SLURM_PROCID=1") && l.notes[0].contains("outer srun (Slurm)"), "{:?}", l.notes);
    // mpirun inside an allocation: the batch step's SLURM_PROCID=0 everywhere, half-set variables too.
    let l = ok(&[
        ("OMPI_COMM_WORLD_RANK", "3"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
        ("PMIX_NAMESPACE", "ns"),
        ("SLURM_PROCID", "0"),
        ("SLURM_JOB_ID", "9"),
    ]);
    assert_eq!(l.params.rank, 3);
    assert_eq!(l.token, TokenSource::Derived("PMIX_NAMESPACE=ns".into()));
    // An outer launch lends nothing: no token from its job identifier.
    let mut v: Vec<_> = TORCH.iter().filter(|(k, _)| *k != "FERROCOLL_JOB_TOKEN").copied().collect();
    v.extend([("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2"), ("SLURM_JOB_ID", "9")]);
    assert_eq!(ok(&v).token, TokenSource::Missing);
}

#[test]
fn missing_and_half_set_variables() {
    let e = err(&[("MASTER_ADDR", "h"), ("LOCAL_RANK", "0")]);
    assert_eq!(e.status(), Status::NotFound);
    let m = e.to_string();
    for name in ["RANK/WORLD_SIZE", "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE", "PMI_RANK/PMI_SIZE", "SLURM_PROCID"] {
        assert!(m.contains(name), "{name} in {m}");
    }
    let e = err(&[("RANK", "1")]);
    assert!(e.to_string().contains("RANK=1 is set but WORLD_SIZE is not"), "{e}");
    let e = err(&[("OMPI_COMM_WORLD_SIZE", "4")]);
    assert!(e.to_string().contains("OMPI_COMM_WORLD_SIZE=4 is set but OMPI_COMM_WORLD_RANK is not"), "{e}");
    let e = err(&[("SLURM_PROCID", "1")]);
    assert!(e.to_string().contains("SLURM_PROCID=1 is set but SLURM_NTASKS is not"), "{e}");
    // Empty counts as unset.
    let l = ok(&[("RANK", ""), ("WORLD_SIZE", " "), ("PMI_RANK", "0"), ("PMI_SIZE", "1"), ("MASTER_PORT", "9")]);
    assert_eq!(l.params.master_addr, "127.0.0.1", "one rank is one host");
    assert_eq!(l.launcher, "MPICH hydra");
}

#[test]
fn bad_values_are_named() {
    let base = [("MASTER_ADDR", "h"), ("MASTER_PORT", "1")];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        err(&v).to_string()
    };
    assert!(with(&[("RANK", "one"), ("WORLD_SIZE", "2")]).contains("RANK=\"one\" is not a non-negative integer"));
    assert!(with(&[("RANK", "-1"), ("WORLD_SIZE", "2")]).contains("RANK=\"-1\""));
    assert!(with(&[("RANK", "4"), ("WORLD_SIZE", "4")]).contains("RANK=4 is not below WORLD_SIZE=4"));
    assert!(with(&[("RANK", "0"), ("WORLD_SIZE", "0")]).contains("WORLD_SIZE=0: a job has at least one rank"));
    let m = with(&[("RANK", "0"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "2"), ("LOCAL_WORLD_SIZE", "2")]);
    assert!(m.contains("LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"), "{m}");
    let m = with(&[("RANK", "0"), ("WORLD_SIZE", "4"), ("LOCAL_WORLD_SIZE", "5")]);
    assert!(m.contains("LOCAL_WORLD_SIZE=5 is not between 1 and WORLD_SIZE=4"), "{m}");
    for port in ["0", "70000", "http"] {
        let e = err(&[("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "h"), ("MASTER_PORT", port)]);
        assert!(e.to_string().contains(&format!("MASTER_PORT={port:?} is not a port")), "{e}");
    }
}

#[test]
fn oob_timeout() {
    let with = |t: &'static str| {
        let mut v = TORCH.to_vec();
        v.push(("UCC_OOB_TIMEOUT", t));
        parse(&vars(&v))
    };
    assert_eq!(with("30s").unwrap().params.connect_timeout, Duration::from_secs(30));
    assert_eq!(with("250ms").unwrap().params.connect_timeout, Duration::from_millis(250));
    assert_eq!(with("inf").unwrap().params.connect_timeout, Duration::MAX);
    let e = with("soon").unwrap_err();
    assert!(e.to_string().contains("UCC_OOB_TIMEOUT") && e.to_string().contains("soon"), "{e}");
    for zero in ["0", "0s", "0ms"] {
        let e = with(zero).unwrap_err();
        assert!(e.to_string().contains(&format!("UCC_OOB_TIMEOUT={zero:?} is not a positive duration")), "{e}");
    }
}

#[test]
fn values_are_trimmed() {
    let l = ok(&[("RANK", " 1 "), ("WORLD_SIZE", "2\n"), ("MASTER_ADDR", " h "), ("MASTER_PORT", " 80 ")]);
    assert_eq!((l.params.rank, l.params.size, l.params.master_addr.as_str(), l.params.master_port), (1, 2, "h", 80));
}

proptest! {
    #[test]
    fn tasks_on_node_matches_the_expansion(groups in prop::collection::vec((0usize..9, 1usize..4), 1..6)) {
        let spec = groups
            .iter()
            .map(|(c, r)| if *r == 1 { c.to_string() } else { format!("{c}(x{r})") })
            .collect::<Vec<_>>()
            .join(",");
        let expanded: Vec<usize> = groups.iter().flat_map(|(c, r)| std::iter::repeat_n(*c, *r)).collect();
        for (node, want) in expanded.iter().enumerate() {
            prop_assert_eq!(tasks_on_node(&spec, node), Some(*want));
        }
        prop_assert_eq!(tasks_on_node(&spec, expanded.len()), None);
    }

    #[test]
    fn any_values_parse_or_fail_cleanly(
        values in prop::collection::vec(prop::option::of("[ -~]{0,12}|[0-9]{1,3}"), VARIABLES.len())
    ) {
        let map: HashMap<String, String> = VARIABLES
            .iter()
            .zip(&values)
            .filter_map(|(k, v)| v.as_ref().map(|v| (k.to_string(), v.clone())))
            .collect();
        if let Ok(l) = parse(&map) {
            prop_assert!(l.params.rank < l.params.size);
            prop_assert!(l.params.master_port > 0);
        }
    }
}
