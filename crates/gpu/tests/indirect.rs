//! Indirect control flow on both engines: `brx.idx` through a `.branchtargets` list, and
//! indirect calls through a `.calltargets` list, a `.callprototype` and NVRTC's call table
//! of device-function pointers. Expected values are derived by hand from the PTX ISA's
//! semantics (§9.7.13.2 `brx.idx`, §9.7.13.4 `call`).

use gpu::{DevPtr, ExecError, Gpu, GpuError, KernelArg};

/// A module with `funcs` before kernel `k(.param .u64 out)`, whose prologue leaves `%r1` =
/// `%tid.x` and `%rd0` = `&out[%tid.x]` (4-byte elements); `body` stores the result.
fn module(funcs: &str, body: &str) -> String {
    format!(
        r#".version 8.0
.target sm_80
.address_size 64
{funcs}
.visible .entry k(.param .u64 out)
{{
    .reg .pred %p<8>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd0, %rd1, %rd2;
{body}
    ret;
}}
"#
    )
}

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Runs one warp of `k` on the functional engine, or the error.
fn try_run(text: &str) -> Result<Vec<u32>, GpuError> {
    let mut gpu = Gpu::new();
    let m = gpu.load_ptx("test.ptx", text)?;
    let out = gpu.alloc(32 * 4);
    gpu.launch(m, "k", [1, 1, 1], [32, 1, 1], 0, &[KernelArg::Ptr(out)])?;
    Ok(words(&gpu.copy_from_device(DevPtr(out.0), 32 * 4)?))
}

/// Runs one warp of `k` on both engines; they must agree.
fn run_both(text: &str) -> Vec<u32> {
    let functional = try_run(text).unwrap_or_else(|e| panic!("{e}"));
    let timing = gpu::timing::TimedGpu::new(gpu::config::GpuConfig::preset("a100").unwrap());
    let mut gpu = Gpu::timed(timing).unwrap();
    let m = gpu.load_ptx("test.ptx", text).unwrap();
    let out = gpu.alloc(32 * 4);
    gpu.launch_timed(
        m,
        "k",
        [1, 1, 1],
        [32, 1, 1],
        0,
        &[KernelArg::Ptr(out)],
        &mut |_| {},
    )
    .unwrap();
    let timed = words(&gpu.copy_from_device(DevPtr(out.0), 32 * 4).unwrap());
    assert_eq!(functional, timed, "the engines disagree");
    functional
}

/// Lane `l` jumps to entry `l & 3` of a four-entry table, each entry setting a different
/// value; the guard keeps some lanes out of the branch, which then fall through.
fn brx_body(guard: &str) -> String {
    format!(
        r#"
    and.b32 %r4, %r1, 3;
    setp.lt.u32 %p1, %r1, 24;
    mov.u32 %r5, 1000;
ts: .branchtargets L0, L1, L2, L3;
    {guard} brx.idx %r4, ts;
    bra.uni JOIN;
L0:
    mov.u32 %r5, 10;
    bra.uni JOIN;
L1:
    mov.u32 %r5, 20;
    bra.uni JOIN;
L2:
    mov.u32 %r5, 30;
    bra.uni JOIN;
L3:
    mov.u32 %r5, 40;
JOIN:
    add.s32 %r5, %r5, %r1;
    st.global.u32 [%rd0], %r5;"#
    )
}

#[test]
fn brx_idx_sends_each_lane_to_its_table_entry_and_reconverges() {
    let entry = |l: u32| 10 * ((l & 3) + 1);
    // `@%p1`: lanes 0-23 branch, lanes 24-31 fall through keeping 1000.
    let got = run_both(&module("", &brx_body("@%p1")));
    let want: Vec<u32> = (0..32)
        .map(|l| if l < 24 { entry(l) + l } else { 1000 + l })
        .collect();
    assert_eq!(got, want);
    // `@!%p1`: the other lanes.
    let got = run_both(&module("", &brx_body("@!%p1")));
    let want: Vec<u32> = (0..32)
        .map(|l| if l < 24 { 1000 + l } else { entry(l) + l })
        .collect();
    assert_eq!(got, want);
    // Unguarded: every lane.
    let got = run_both(&module("", &brx_body("")));
    let want: Vec<u32> = (0..32).map(|l| entry(l) + l).collect();
    assert_eq!(got, want);
}

#[test]
fn brx_idx_outside_its_list_stops_the_kernel_naming_thread_and_index() {
    let body = r#"
ts: .branchtargets A, B;
    brx.idx %r1, ts;
A:
B:
    st.global.u32 [%rd0], %r1;"#;
    let e = try_run(&module("", body)).unwrap_err();
    let text = e.to_string();
    // Lanes 2..31 are out of range; the lowest is named.
    assert!(
        matches!(
            e,
            GpuError::Exec(ExecError::UnmatchedTarget { value: 2, .. })
        ) && text.contains("thread (2, 0, 0)")
            && text.contains("`brx.idx` index 2 is outside its `.branchtargets` list")
            && text.contains("test.ptx:"),
        "{text}"
    );
}

const FUNCS: &str = r#"
.func (.param .b32 r) twice(.param .b32 a)
{
    .reg .b32 %t<2>;
    ld.param.b32 %t0, [a];
    shl.b32 %t1, %t0, 1;
    st.param.b32 [r], %t1;
    ret;
}
.func (.param .b32 r) plus7(.param .b32 a)
{
    .reg .b32 %t<2>;
    ld.param.b32 %t0, [a];
    add.s32 %t1, %t0, 7;
    st.param.b32 [r], %t1;
    ret;
}
.func (.param .b64 r) wide(.param .b32 a)
{
    .reg .b32 %t<1>;
    .reg .b64 %w<1>;
    ld.param.b32 %t0, [a];
    cvt.u64.u32 %w0, %t0;
    st.param.b64 [r], %w0;
    ret;
}
"#;

/// Even lanes call `twice`, odd lanes `plus7`, through one register, with the callee list
/// given by `table` (a `.calltargets` label or a `.callprototype` label, declared in `decl`).
fn call_body(decl: &str, table: &str, odd: &str) -> String {
    format!(
        r#"
    mov.u64 %rd4, twice;
    mov.u64 %rd5, {odd};
    and.b32 %r4, %r1, 1;
    setp.eq.u32 %p1, %r4, 0;
    selp.b64 %rd6, %rd4, %rd5, %p1;
    {{
    .param .b32 arg;
    .param .b32 ret;
    {decl}
    st.param.b32 [arg], %r1;
    call (ret), %rd6, (arg), {table};
    ld.param.b32 %r5, [ret];
    }}
    st.global.u32 [%rd0], %r5;"#
    )
}

#[test]
fn indirect_calls_reach_the_function_at_each_lanes_address() {
    let want: Vec<u32> = (0..32)
        .map(|l| if l % 2 == 0 { 2 * l } else { l + 7 })
        .collect();
    let listed = call_body("ct: .calltargets twice, plus7;", "ct", "plus7");
    assert_eq!(run_both(&module(FUNCS, &listed)), want);
    // Through a prototype: the candidates are the functions whose address is taken and
    // whose signature matches (`wide` returns 8 bytes, so it is not one of them).
    let proto = call_body(
        "p: .callprototype (.param .b32 _) _ (.param .b32 _);",
        "p",
        "plus7",
    );
    assert_eq!(run_both(&module(FUNCS, &proto)), want);
}

#[test]
fn an_indirect_call_to_a_function_outside_its_candidates_is_an_error() {
    // `wide` has its address taken but does not match the prototype.
    let proto = call_body(
        "p: .callprototype (.param .b32 _) _ (.param .b32 _);",
        "p",
        "wide",
    );
    let e = try_run(&module(FUNCS, &proto)).unwrap_err();
    let text = e.to_string();
    let wide = kir::module::FUNCTION_ADDRESS_BASE + 2 * kir::module::FUNCTION_ADDRESS_STRIDE;
    assert!(
        matches!(e, GpuError::Exec(ExecError::UnmatchedTarget { value, .. }) if value == wide)
            && text.contains("thread (1, 0, 0)")
            && text.contains("indirect `call` through 0x7c00"),
        "{text}"
    );
    // A function pointer is no data address.
    let body = "    mov.u64 %rd4, twice;\n    ld.u32 %r5, [%rd4];\n    st.global.u32 [%rd0], %r5;";
    assert!(matches!(
        try_run(&module(FUNCS, body)),
        Err(GpuError::Exec(ExecError::MemoryFault { .. }))
    ));
}

#[test]
fn recursion_through_a_function_pointer_is_a_load_error() {
    let funcs = r#"
.func (.param .b32 r) self_call(.param .b32 a)
{
    .reg .b64 %f;
    .param .b32 x;
    .param .b32 y;
    mov.u64 %f, self_call;
    ct: .calltargets self_call;
    call (y), %f, (x), ct;
    ret;
}
"#;
    let body = r#"
    {
    .param .b32 arg;
    .param .b32 ret;
    call (ret), self_call, (arg);
    }"#;
    let e = try_run(&module(funcs, body)).unwrap_err().to_string();
    assert!(e.contains("recursive call to `self_call`"), "{e}");
}

/// NVRTC 13's code for `ops[sel[i] % 3](x[i], 2.0f)` (`data/fptr.cu`): the call table is a
/// global array initialised with function names, the call goes through a `.callprototype`.
#[test]
fn nvrtc_function_pointer_table() {
    let text = include_str!("data/fptr.sm_90.ptx");
    let n = 96u32;
    let sel: Vec<i32> = (0..n as i32).map(|i| (i * 7) % 11).collect();
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 10.0).collect();
    let want: Vec<f32> = sel
        .iter()
        .zip(&x)
        .map(|(&s, &v)| match s % 3 {
            0 => v + 2.0,
            1 => v * 2.0,
            _ => v - 2.0,
        })
        .collect();
    let as_bytes = |v: Vec<[u8; 4]>| v.concat();
    for timed in [false, true] {
        let mut gpu = if timed {
            let t = gpu::timing::TimedGpu::new(gpu::config::GpuConfig::preset("h100").unwrap());
            Gpu::timed(t).unwrap()
        } else {
            Gpu::new()
        };
        let m = gpu.load_ptx("fptr.sm_90.ptx", text).unwrap();
        let dsel = gpu.alloc(u64::from(n) * 4);
        let dx = gpu.alloc(u64::from(n) * 4);
        let dy = gpu.alloc(u64::from(n) * 4);
        gpu.copy_to_device(
            dsel,
            &as_bytes(sel.iter().map(|v| v.to_le_bytes()).collect()),
        )
        .unwrap();
        gpu.copy_to_device(dx, &as_bytes(x.iter().map(|v| v.to_le_bytes()).collect()))
            .unwrap();
        let args = [
            KernelArg::Ptr(dsel),
            KernelArg::Ptr(dx),
            KernelArg::Ptr(dy),
            KernelArg::I32(n as i32),
        ];
        if timed {
            gpu.launch_timed(m, "fptr", [3, 1, 1], [32, 1, 1], 0, &args, &mut |_| {})
                .unwrap();
        } else {
            gpu.launch(m, "fptr", [3, 1, 1], [32, 1, 1], 0, &args)
                .unwrap();
        }
        let got: Vec<f32> = gpu
            .copy_from_device(dy, u64::from(n) * 4)
            .unwrap()
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, want, "timed: {timed}");
    }
}
