//! The sweep file: points in a fixed order, and every mistake an error naming the file, the
//! line and the field.

use sweep::spec::parse;

fn err(text: &str) -> String {
    parse("s.toml", text).unwrap_err().to_string()
}

#[test]
fn grid_is_every_combination_the_last_key_fastest() {
    let s = parse(
        "dir/s.toml",
        "threads = 2\n[fixed]\nsize = \"small\"\n[grid]\nkernel = [\"reduce\", \"scan\"]\nseed = [1, 2, 3]\n",
    )
    .unwrap();
    assert_eq!(s.threads, 2);
    assert_eq!(s.dir, std::path::Path::new("dir"));
    let got: Vec<(String, i64)> = s
        .points
        .iter()
        .map(|p| {
            assert_eq!(p.str("size"), Some("small"));
            (
                p.str("kernel").unwrap().to_string(),
                p.fields["seed"].as_integer().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, i64)> = [
        ("reduce", 1),
        ("reduce", 2),
        ("reduce", 3),
        ("scan", 1),
        ("scan", 2),
        ("scan", 3),
    ]
    .iter()
    .map(|(k, s)| (k.to_string(), *s))
    .collect();
    assert_eq!(got, want);
    assert_eq!(s.points[0].at["seed"], "dir/s.toml:6");
    assert_eq!(s.points[0].at["size"], "dir/s.toml:3");
}

#[test]
fn a_list_of_points_is_crossed_with_the_grid() {
    let s = parse(
        "s.toml",
        "[[point]]\nkernel = \"reduce\"\n[[point]]\nscenario = \"a.toml\"\npolicy = \"npq\"\n[grid]\ngpu = [\"gtx480\", \"k20c\"]\n",
    )
    .unwrap();
    assert_eq!(s.points.len(), 4);
    assert_eq!(s.points[1].str("kernel"), Some("reduce"));
    assert_eq!(s.points[1].str("gpu"), Some("k20c"));
    assert_eq!(s.points[2].str("scenario"), Some("a.toml"));
    assert_eq!(s.points[2].str("policy"), Some("npq"));
}

#[test]
fn unknown_field_names_file_line_and_field() {
    assert_eq!(
        err("[fixed]\nkernel = \"reduce\"\n\nsede = 3\n"),
        "s.toml:4: `sede`: unknown field; a point has kernel, scenario, gpu, scheduler, size, seed, target, policy, mechanism, sharing, time_slice_us, alone, max_cycles and scenario.PATH"
    );
}

#[test]
fn unknown_table_names_the_line() {
    let e = err("[fixed]\nkernel = \"reduce\"\n[grids]\nseed = [1]\n");
    assert!(
        e.starts_with("s.toml:3: `sweep`: unknown field `grids`"),
        "{e}"
    );
}

#[test]
fn bad_values_name_the_line_and_field() {
    assert_eq!(
        err("[grid]\nkernel = [\"reduce\", \"nope\"]\n"),
        format!(
            "s.toml:2: `kernel`: no suite kernel `nope`; the suite has: {}",
            suite::all()
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        )
    );
    assert_eq!(
        err("[fixed]\nkernel = \"reduce\"\n[grid]\nsize = [\"small\", \"tiny\"]\n"),
        "s.toml:4: `size`: `tiny`: expected one of small, large, huge"
    );
    assert_eq!(
        err("[fixed]\nkernel = \"reduce\"\nseed = -1\n"),
        "s.toml:3: `seed`: integer `-1`: expected a positive integer"
    );
    let e = err("[fixed]\nscenario = \"a.toml\"\n[grid]\nmechanism = [\"live\", \"teleport\"]\n");
    assert!(e.starts_with("s.toml:4: `mechanism`: "), "{e}");
    assert!(e.contains("teleport"), "{e}");
    assert_eq!(
        err("threads = 0\n[grid]\nkernel = [\"reduce\"]\n"),
        "s.toml:1: `threads`: 0 is out of 1..=1024"
    );
}

#[test]
fn empty_grid_is_an_error() {
    assert_eq!(
        err("[fixed]\nkernel = \"reduce\"\n[grid]\nseed = []\n"),
        "s.toml:4: `grid.seed`: an empty list: the grid would have no point"
    );
    assert_eq!(
        err("description = \"nothing\"\n"),
        "s.toml: `grid`: the sweep has no point: give [fixed] fields, a [grid] of lists or [[point]] tables"
    );
    assert_eq!(
        err("[grid]\nseed = 3\n"),
        "s.toml:2: `grid.seed`: integer `3`: a grid axis is a list"
    );
}

#[test]
fn fields_must_fit_the_kind_of_point() {
    assert_eq!(
        err("[fixed]\nkernel = \"reduce\"\npolicy = \"npq\"\n"),
        "s.toml:3: `policy`: only a scenario point has this field"
    );
    assert_eq!(
        err("[fixed]\nscenario = \"a.toml\"\ntarget = \"sm_70\"\n"),
        "s.toml:3: `target`: only a kernel point has this field"
    );
    assert_eq!(
        err("[fixed]\nkernel = \"reduce\"\nscenario = \"a.toml\"\n"),
        "s.toml:3: `scenario`: a point runs a suite kernel (`kernel`) or a scenario (`scenario`), not both"
    );
    assert_eq!(
        err("[grid]\nseed = [1]\n"),
        "s.toml:2: `seed`: the point names neither a suite kernel (`kernel`) nor a scenario (`scenario`)"
    );
    assert_eq!(
        err("[fixed]\nkernel = \"reduce\"\n[grid]\nkernel = [\"scan\"]\n"),
        "s.toml:4: `grid.kernel`: given in [fixed] or a [[point]] too"
    );
}
