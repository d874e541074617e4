//! One name for each choice: every mechanism and policy is spelled the same on the command
//! line (`workload::choice::parse`) and in a scenario file, with its parameters; a bad name,
//! parameter or value is refused naming it (and, in a file, where); and a parameter set in a
//! scenario reaches the mechanism it configures.

use std::path::Path;

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use preempt::{MechanismKind, Record, Technique};
use sched::PolicyKind;
use workload::choice::{self, ChoiceError};
use workload::{parse, Files, Setup, System};

struct NoFiles;

impl Files for NoFiles {
    fn read(&self, _: &Path) -> Result<Vec<u8>, String> {
        Err("no such file".into())
    }
}

const PROCESS: &str = "\n[[process]]\nname = \"p\"\nsuite = \"gemm\"\n";

/// The scenario with `scheduler` as its `[scheduler]` section.
fn scenario(scheduler: &str) -> Result<workload::Scenario, String> {
    parse(
        "s.toml",
        &format!("[scheduler]\n{scheduler}\n{PROCESS}"),
        &NoFiles,
    )
    .map_err(|e| e.to_string())
}

/// Every mechanism at its defaults, and each parameter set away from its default.
fn mechanisms() -> Vec<MechanismKind> {
    let mut all = MechanismKind::ALL.to_vec();
    all.extend([
        MechanismKind::Chimera { deadline_us: 5.0 },
        MechanismKind::Chimera { deadline_us: 0.25 },
        MechanismKind::Lightweight {
            compressor_latency: 0,
        },
        MechanismKind::LightweightTb {
            compressor_latency: 7,
        },
        MechanismKind::LightweightInPlace {
            compressor_latency: 40,
        },
        MechanismKind::ChimeraDirty { deadline_us: 7.5 },
        MechanismKind::Pep {
            predicted_launch_us: 25.0,
        },
        MechanismKind::PepInPlace {
            predicted_launch_us: 0.0,
        },
        MechanismKind::Ckpt {
            every: 4,
            least_live: false,
        },
    ]);
    all
}

fn policies() -> Vec<PolicyKind> {
    let mut all = PolicyKind::ALL.to_vec();
    all.push(PolicyKind::TimeSlice {
        slice_us: Some(12.5),
    });
    all.push(PolicyKind::Dss { tokens: Some(4) });
    all.push(PolicyKind::Mps {
        percentage: Some(37.5),
    });
    all.push(PolicyKind::Ppq {
        access: sched::PpqAccess::Exclusive,
    });
    all.push(PolicyKind::Mig { instances: Some(3) });
    all.push(PolicyKind::Smk {
        epoch: Some(250),
        ipc: sched::Ipcs::new(&[1.5, 0.25]),
    });
    all.push(PolicyKind::Smk {
        epoch: None,
        ipc: sched::Ipcs::new(&[2.0]),
    });
    all.push(PolicyKind::Fixed {
        tbs: sched::TbCounts::new(&[7, 4]).unwrap(),
        noc: sched::TbCounts::new(&[20, 5]),
    });
    all.push(PolicyKind::Fixed {
        tbs: sched::TbCounts::new(&[3]).unwrap(),
        noc: None,
    });
    all.push(PolicyKind::Ccbp {
        warm_up: Some(500),
        sample: Some(2500),
        prior_lsk: Some(1.5),
    });
    all.push(PolicyKind::Ccbp {
        warm_up: None,
        sample: None,
        prior_lsk: Some(4.0),
    });
    all
}

/// `name[:key=value,...]` as a scenario's inline table.
fn table(spec: &str) -> String {
    let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
    let mut t = format!("{{ kind = \"{name}\"");
    for p in params.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = p.split_once('=').unwrap();
        // Numbers and booleans as they are, names (`access=exclusive`) as strings.
        if v.parse::<f64>().is_ok() || v.parse::<bool>().is_ok() {
            t += &format!(", {k} = {v}");
        } else {
            t += &format!(", {k} = \"{v}\"");
        }
    }
    t + " }"
}

#[test]
fn every_mechanism_round_trips_through_the_command_line_and_a_scenario() {
    for m in mechanisms() {
        let spec = m.to_string();
        assert!(
            !spec.contains('_') || spec.contains(':'),
            "{spec}: names are kebab-case"
        );
        let cli: MechanismKind = choice::parse(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(cli, m, "{spec}");
        assert_eq!(cli.to_string(), spec);
        // Defaults are written by name alone; a table names the kind and the parameters.
        let mut written = vec![table(&spec)];
        if !spec.contains(':') {
            written.push(format!("\"{spec}\""));
        }
        for w in written {
            let s = scenario(&format!("mechanism = {w}")).unwrap_or_else(|e| panic!("{w}: {e}"));
            assert_eq!(s.mechanism, m, "{w}");
            assert_eq!(s.mechanism.to_string(), spec, "{w}");
        }
        // A `[scheduler.mechanism]` section is the same table.
        let section = format!(
            "[scheduler.mechanism]\n{}",
            table(&spec)
                .trim_matches(|c| c == '{' || c == '}')
                .replace(", ", "\n")
        );
        let s = parse("s.toml", &format!("{section}\n{PROCESS}"), &NoFiles)
            .unwrap_or_else(|e| panic!("{section}: {e}"));
        assert_eq!(s.mechanism, m, "{section}");
        // The built mechanism answers to the same name.
        assert_eq!(m.build().name(), m.name());
    }
    // The command line's lists: commas between mechanisms, a `key=value` item continuing
    // the mechanism before it; every flag's list read by the same parser.
    let all = mechanisms();
    let list: Vec<String> = all.iter().map(|m| m.to_string()).collect();
    assert_eq!(
        choice::parse_list::<MechanismKind>(&list.join(",")).unwrap(),
        all
    );
    // CTXBack+CS-Defer may be written as the paper writes it.
    let combined: MechanismKind = choice::parse("ctxback+cs-defer").unwrap();
    assert_eq!(combined, MechanismKind::CtxBackCsDefer);
    assert_eq!(combined.to_string(), "ctxback-cs-defer");
    assert_eq!(
        choice::parse_list::<MechanismKind>("lightweight:compressor_latency=3,drain").unwrap(),
        [
            MechanismKind::Lightweight {
                compressor_latency: 3
            },
            MechanismKind::Drain
        ]
    );
}

#[test]
fn every_policy_round_trips_through_the_command_line_and_a_scenario() {
    for p in policies() {
        let spec = p.to_string();
        let cli: PolicyKind = choice::parse(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(cli, p, "{spec}");
        assert_eq!(cli.to_string(), spec);
        let mut written = vec![table(&spec)];
        if !spec.contains(':') {
            written.push(format!("\"{spec}\""));
        }
        for w in written {
            let s = scenario(&format!("policy = {w}")).unwrap_or_else(|e| panic!("{w}: {e}"));
            assert_eq!(s.policy, p, "{w}");
            assert_eq!(s.policy.to_string(), spec, "{w}");
        }
    }
    // `time_slice_us` stays the slice of a time-slice policy that names none.
    let s = scenario("policy = \"time-slice\"\ntime_slice_us = 20.0").unwrap();
    assert_eq!(s.policy, PolicyKind::TimeSlice { slice_us: None });
    assert_eq!(s.time_slice_us, 20.0);
}

#[test]
fn the_snake_case_names_of_earlier_scenarios_still_read_and_print_in_kebab_case() {
    for (old, new) in [
        ("flush_strict", "flush-strict"),
        ("flush_relaxed", "flush-relaxed"),
        ("points_live", "points-live"),
        ("lightweight_tb", "lightweight-tb"),
        ("lightweight_in_place", "lightweight-in-place"),
    ] {
        let s = scenario(&format!("mechanism = \"{old}\"")).unwrap();
        assert_eq!(s.mechanism.to_string(), new);
    }
    let s = scenario("policy = \"time_slice\"").unwrap();
    assert_eq!(s.policy.to_string(), "time-slice");
}

#[test]
fn bad_names_parameters_and_values_are_refused_naming_them_and_where() {
    // (the [scheduler] line, what the message must name)
    let cases = [
        (
            "mechanism = \"chimaera\"",
            &["unknown variant `chimaera`", "chimera"][..],
        ),
        (
            "mechanism = { kind = \"chimera\", deadlin_us = 10 }",
            &["unknown field `deadlin_us`", "deadline_us"],
        ),
        (
            "mechanism = { kind = \"drain\", deadline_us = 10 }",
            &["unknown field `deadline_us`"],
        ),
        (
            "mechanism = { kind = \"chimera\", deadline_us = \"soon\" }",
            &["`deadline_us`", "invalid type: string \"soon\""],
        ),
        (
            "mechanism = { kind = \"chimera\", deadline_us = -5.0 }",
            &["`deadline_us` = -5 is out of range"],
        ),
        (
            "mechanism = { kind = \"chimera\", deadline_us = inf }",
            &["`deadline_us` = inf is out of range"],
        ),
        (
            "mechanism = { kind = \"chimera\", deadline_us = nan }",
            &["`deadline_us` = NaN is out of range"],
        ),
        (
            "mechanism = { kind = \"pep\", predicted_launch_us = -1.0 }",
            &["`predicted_launch_us` = -1 is out of range"],
        ),
        (
            "mechanism = { kind = \"pep-in-place\", deadline_us = 10 }",
            &["unknown field `deadline_us`", "predicted_launch_us"],
        ),
        (
            "mechanism = { kind = \"lightweight\", compressor_latency = 1.5 }",
            &["`compressor_latency`", "floating point `1.5`"],
        ),
        (
            "mechanism = { deadline_us = 10 }",
            &["missing field `kind`"],
        ),
        ("mechanism = 3", &["a name, or a table with a `kind`"]),
        (
            "policy = { kind = \"npq\", slice_us = 10 }",
            &["unknown field `slice_us`"],
        ),
        (
            "policy = { kind = \"time-slice\", slice_us = 0 }",
            &["`slice_us` = 0 is out of range"],
        ),
        (
            "policy = { kind = \"ppq\", access = \"private\" }",
            &["unknown variant `private`", "exclusive", "shared"],
        ),
        (
            "policy = { kind = \"mps\", percentage = 150.0 }",
            &["`percentage` = 150 is out of range"],
        ),
        (
            "policy = { kind = \"mig\", instances = 0 }",
            &["`instances` = 0 is out of range"],
        ),
        (
            "policy = { kind = \"mig\", instances = 2000 }",
            &["`instances` = 2000 is out of range"],
        ),
        (
            "policy = { kind = \"mig\", percentage = 50.0 }",
            &["unknown field `percentage`", "instances"],
        ),
        (
            "policy = { kind = \"dss\", tokens = 0 }",
            &["`tokens` = 0 is out of range"],
        ),
        (
            "policy = { kind = \"dss\", tokens = -3 }",
            &["`tokens`", "invalid value"],
        ),
        (
            "policy = { kind = \"dss\", slice_us = 10 }",
            &["unknown field `slice_us`", "tokens"],
        ),
        (
            "policy = { kind = \"smk\", epoch = 0 }",
            &["`epoch` = 0 is out of range"],
        ),
        (
            "policy = { kind = \"smk\", ipc = [1.0, -2.0] }",
            &["`ipc` = [1.0, -2.0] is out of range"],
        ),
        (
            "policy = { kind = \"smk\", ipc = \"1/fast\" }",
            &["`ipc`", "`fast` is not a number"],
        ),
        (
            "policy = { kind = \"left-over\", epoch = 10 }",
            &["unknown field `epoch`"],
        ),
        (
            "policy = { kind = \"smk\", quota = 10 }",
            &["unknown field `quota`", "epoch", "ipc"],
        ),
        (
            "policy = { kind = \"maestro\", epoch = 1 }",
            &["`epoch` = 1 is out of range"],
        ),
        (
            "policy = { kind = \"maestro\", ipc = [1.0, 0.0] }",
            &["`ipc`", "out of range"],
        ),
        (
            "policy = { kind = \"warped-slicer\", sample = 0 }",
            &["`sample` = 0 is out of range"],
        ),
        (
            "policy = { kind = \"warped-slicer\", warm_up = -1 }",
            &["`warm_up`", "invalid value"],
        ),
        (
            "policy = { kind = \"warped-slicer\", epoch = 10 }",
            &["unknown field `epoch`", "warm_up", "sample"],
        ),
        (
            "policy = { kind = \"ccbp\", prior_lsk = 0 }",
            &["`prior_lsk` = 0 is out of range"],
        ),
        (
            "policy = { kind = \"ccbp\", prior_lsk = \"high\" }",
            &["`prior_lsk`", "invalid type"],
        ),
        (
            "policy = { kind = \"ccbp\", sample = 0 }",
            &["`sample` = 0 is out of range"],
        ),
        (
            "policy = { kind = \"ccbp\", tbs = [1, 2] }",
            &["unknown field `tbs`", "prior_lsk"],
        ),
        (
            "policy = { kind = \"fixed\", tbs = [7, 0] }",
            &["`tbs` = [7, 0] is out of range"],
        ),
        ("policy = \"fixed\"", &["missing field `tbs`"]),
        (
            "policy = { kind = \"fixed\", tbs = [7, 4], noc = [16, 0] }",
            &["`noc` = [16, 0] is out of range", "request quotas"],
        ),
        (
            "policy = { kind = \"fixed\", tbs = [7, 4], noc = \"16/many\" }",
            &["`noc`", "`many` is not a request quota"],
        ),
    ];
    for (line, wants) in cases {
        // Line 3 of the file, after a description and the section header.
        let text = format!("description = \"bad\"\n[scheduler]\n{line}\n{PROCESS}");
        let e = parse("bad.toml", &text, &NoFiles).unwrap_err().to_string();
        let col = line.find('=').unwrap() + 3;
        let field = line.split(' ').next().unwrap();
        assert!(
            e.starts_with(&format!("bad.toml:3:{col}: `scheduler.{field}`: ")),
            "{line}: {e}"
        );
        for w in wants {
            assert!(e.contains(w), "{line}: {w}: {e}");
        }
    }
    // A `[scheduler.mechanism]` section is located at its header.
    let e = parse(
        "bad.toml",
        &format!("[scheduler.mechanism]\nkind = \"chimera\"\ndeadline_us = 0\n{PROCESS}"),
        &NoFiles,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("bad.toml:1:1: `scheduler.mechanism`: `deadline_us` = 0 is out of range"),
        "{e}"
    );

    // The command line says the same, naming the parameter.
    let cli = |spec: &str| choice::parse::<MechanismKind>(spec).unwrap_err();
    assert!(cli("chimaera")
        .to_string()
        .contains("unknown variant `chimaera`"));
    assert!(cli("chimera:deadlin_us=10")
        .to_string()
        .contains("unknown field `deadlin_us`, expected `deadline_us`"));
    assert!(cli("drain:deadline_us=10")
        .to_string()
        .contains("unknown field `deadline_us`"));
    for bad in ["-1", "0", "inf", "NaN", "1e300"] {
        let e = cli(&format!("chimera:deadline_us={bad}")).to_string();
        assert!(
            e.starts_with("`deadline_us` = ") && e.contains("out of range"),
            "{bad}: {e}"
        );
    }
    assert!(cli("chimera:deadline_us=soon")
        .to_string()
        .contains("`deadline_us`: invalid type: string \"soon\""));
    assert!(cli("lightweight:compressor_latency=-2")
        .to_string()
        .contains("`compressor_latency`"));
    assert_eq!(
        cli("chimera:deadline_us"),
        ChoiceError::NotKeyValue {
            item: "deadline_us".into()
        }
    );
    assert_eq!(
        cli("chimera:deadline_us=1,deadline_us=2"),
        ChoiceError::Duplicate {
            key: "deadline_us".into()
        }
    );
    assert_eq!(cli(""), ChoiceError::Empty);
    let e = choice::parse::<PolicyKind>("time-slice:slice_us=x").unwrap_err();
    assert!(e.to_string().contains("`slice_us`"), "{e}");
}

/// A long low-priority kernel preempted for a high-priority one under PPQ with Chimera at
/// `deadline`: the deadline each choice worked to (core cycles) and the techniques chosen.
fn chimera_choices(deadline: &str) -> (Vec<f64>, Vec<Technique>, f64) {
    let text = format!(
        r#"
[scheduler]
policy = "ppq"
mechanism = {{ kind = "chimera", deadline_us = {deadline} }}

[[process]]
name = "low"
suite = "branchy"

[[process]]
name = "high"
suite = "gemm"
arrival_us = 10.0
priority = 10
"#
    );
    let s = parse("chimera.toml", &text, &NoFiles).unwrap_or_else(|e| panic!("{e}"));
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let clock_mhz = gpu.sm.clock_mhz;
    let r = System::new(
        Setup::for_scenario(&s, TimedGpu::new(gpu), 1 << 30).unwrap(),
        &s.processes,
    )
    .unwrap()
    .run(&mut |_| {})
    .unwrap_or_else(|e| panic!("{e}"));
    for p in &r.processes {
        assert!(p.verdict.as_ref().unwrap().verified, "{}", p.name);
    }
    let (mut deadlines, mut techniques) = (Vec::new(), Vec::new());
    for p in &r.preemptions {
        if let Record::Chose {
            technique,
            estimates,
            ..
        } = p
        {
            deadlines.push(estimates.deadline);
            techniques.push(*technique);
        }
    }
    (deadlines, techniques, clock_mhz)
}

#[test]
fn a_chimera_deadline_set_in_a_scenario_reaches_the_mechanism() {
    let (tight, tight_choices, clock_mhz) = chimera_choices("0.01");
    let (loose, loose_choices, _) = chimera_choices("100000");
    eprintln!("tight: {tight_choices:?}\nloose: {loose_choices:?}");
    assert!(
        !tight.is_empty() && !loose.is_empty(),
        "Chimera chose nothing"
    );
    assert!(
        tight.iter().all(|&d| d == 0.01 * clock_mhz),
        "tight deadlines {tight:?}"
    );
    assert!(
        loose.iter().all(|&d| d == 100000.0 * clock_mhz),
        "loose deadlines {loose:?}"
    );
    assert_ne!(
        tight_choices, loose_choices,
        "the deadline did not change what Chimera chose"
    );
}

#[test]
fn mig_is_spelled_alike_on_the_command_line() {
    let p: PolicyKind = choice::parse("mig:instances=4").unwrap();
    assert_eq!(p, PolicyKind::Mig { instances: Some(4) });
    let e = choice::parse::<PolicyKind>("mig:instances=0")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`instances` = 0 is out of range"), "{e}");
    let e = choice::parse::<PolicyKind>("mig:sms=3")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown field `sms`, expected `instances`"),
        "{e}"
    );
}
