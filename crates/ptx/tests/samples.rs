//! Tree-shape tests on the committed samples in `tests/data/`: hand-written files in NVRTC's
//! style (`saxpy.ptx`, `reduce_shared.ptx`, `device_call.ptx`) and real NVRTC 12/13 output
//! (`nvrtc*.ptx`).

use ptx::ast::*;
use ptx::{SourceFile, Span};

fn load(name: &str) -> (SourceFile, Module) {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let module = ptx::parse(&text).unwrap_or_else(|e| {
        let f = SourceFile::new(name, text.clone());
        panic!("{}: {e}", f.location(e.span()))
    });
    (SourceFile::new(name, text), module)
}

fn function<'m>(m: &'m Module, name: &str) -> &'m Function {
    m.items
        .iter()
        .find_map(|i| match i {
            Item::Function(f) if f.name.value == name => Some(f),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no function {name}"))
}

fn var<'m>(m: &'m Module, name: &str) -> &'m VarDecl {
    m.items
        .iter()
        .find_map(|i| match i {
            Item::Var(v) if v.name.value == name => Some(v),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no variable {name}"))
}

/// The text a span covers.
fn text(f: &SourceFile, s: Span) -> &str {
    &f.text[s.start as usize..s.end as usize]
}

/// Renders an operand back to canonical PTX, to compare whole bodies compactly.
fn op(o: &Operand) -> String {
    match &o.kind {
        OperandKind::Ident { name, component } => match component {
            Some(c) => format!("{name}.{c}"),
            None => name.clone(),
        },
        OperandKind::Int(v) => v.to_string(),
        OperandKind::Float(FloatLit::F32(b)) => format!("0f{b:08X}"),
        OperandKind::Float(FloatLit::F64(b)) => format!("0d{b:016X}"),
        OperandKind::Address { base, offset } => match (base, offset) {
            (Some(b), 0) => format!("[{}]", b.name),
            (Some(b), o) => format!("[{}{o:+}]", b.name),
            (None, o) => format!("[{o}]"),
        },
        OperandKind::Vector(v) => format!("{{{}}}", list(v)),
        OperandKind::List(v) => format!("({})", list(v)),
        OperandKind::AddressTuple(v) => format!("[{}]", list(v)),
        OperandKind::Sink => "_".into(),
        OperandKind::Not(inner) => format!("!{}", op(inner)),
        OperandKind::PredPair(a, b) => format!("{}|{}", a.value, b.value),
    }
}

fn list(v: &[Operand]) -> String {
    v.iter().map(op).collect::<Vec<_>>().join(", ")
}

fn render(i: &Instruction) -> String {
    let mut s = String::new();
    if let Some(g) = &i.guard {
        s += &format!("@{}{} ", if g.negated { "!" } else { "" }, g.pred.value);
    }
    s += &i.opcode.value;
    for m in &i.modifiers {
        s += ".";
        s += &m.value;
    }
    if !i.operands.is_empty() {
        s += " ";
        s += &list(&i.operands);
    }
    s
}

/// Every statement rendered on one line; nested blocks as `{` ... `}`.
fn render_block(b: &Block, out: &mut Vec<String>) {
    for st in &b.statements {
        match st {
            Statement::Instruction(i) => out.push(render(i)),
            Statement::Label(l) => out.push(format!("{}:", l.value)),
            Statement::Targets(t) => out.push(format!(
                "{}: {:?} {}",
                t.name.value,
                t.kind,
                t.targets
                    .iter()
                    .map(|x| x.value.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Statement::CallPrototype(p) => out.push(format!(
                "{}: prototype {} -> {}",
                p.name.value,
                p.params.len(),
                p.returns.len()
            )),
            Statement::Pragma(p) => out.push(format!("pragma {}", p.value)),
            Statement::Reg(r) => {
                let names: Vec<String> = r
                    .names
                    .iter()
                    .map(|n| match n.range {
                        Some(k) => format!("{}<{k}>", n.name.value),
                        None => n.name.value.clone(),
                    })
                    .collect();
                let v = if r.vector > 1 {
                    format!("v{} ", r.vector)
                } else {
                    String::new()
                };
                out.push(format!("reg {v}{:?} {}", r.ty, names.join(", ")));
            }
            Statement::Var(v) => out.push(format!(
                "var {:?} {:?} {}{:?}",
                v.space, v.ty, v.name.value, v.array_dims
            )),
            Statement::Block(inner) => {
                out.push("{".into());
                render_block(inner, out);
                out.push("}".into());
            }
        }
    }
}

fn body_lines(f: &Function) -> Vec<String> {
    let mut out = Vec::new();
    render_block(f.body.as_ref().expect("function has a body"), &mut out);
    out
}

fn instructions(b: &Block) -> Vec<&Instruction> {
    let mut out = Vec::new();
    for st in &b.statements {
        match st {
            Statement::Instruction(i) => out.push(i),
            Statement::Block(inner) => out.extend(instructions(inner)),
            _ => {}
        }
    }
    out
}

fn ident(name: &str) -> OperandKind {
    OperandKind::Ident {
        name: name.into(),
        component: None,
    }
}

#[test]
fn saxpy_header_params_and_body() {
    let (f, m) = load("saxpy.ptx");
    assert_eq!(m.version, (8, 4));
    assert_eq!(m.target, ["sm_70"]);
    assert_eq!(m.address_size, 64);
    assert_eq!(m.items.len(), 1);
    let k = function(&m, "saxpy");
    assert_eq!(k.kind, FunctionKind::Entry);
    assert_eq!(k.linkage, Some(Linkage::Visible));
    assert!(k.returns.is_empty());
    let params: Vec<(StateSpace, ScalarType, &str)> = k
        .params
        .iter()
        .map(|p| (p.space, p.ty, p.name.value.as_str()))
        .collect();
    assert_eq!(
        params,
        [
            (StateSpace::Param, ScalarType::F32, "saxpy_param_0"),
            (StateSpace::Param, ScalarType::U64, "saxpy_param_1"),
            (StateSpace::Param, ScalarType::U64, "saxpy_param_2"),
            (StateSpace::Param, ScalarType::U32, "saxpy_param_3"),
        ]
    );
    assert_eq!(text(&f, k.params[3].span), ".param .u32 saxpy_param_3");
    assert_eq!(k.performance.len(), 1);
    assert_eq!(
        k.performance[0].value,
        Performance::MaxNtid(vec![256, 1, 1])
    );
    assert_eq!(text(&f, k.performance[0].span), ".maxntid 256, 1, 1");
    assert!(text(&f, k.span).starts_with(".visible .entry saxpy("));
    assert!(text(&f, k.span).ends_with("ret;\n\n}"));

    assert_eq!(
        body_lines(k),
        [
            "reg Pred %p<2>",
            "reg F32 %f<5>",
            "reg B32 %r<6>",
            "reg B64 %rd<8>",
            "ld.param.f32 %f1, [saxpy_param_0]",
            "ld.param.u64 %rd1, [saxpy_param_1]",
            "ld.param.u64 %rd2, [saxpy_param_2]",
            "ld.param.u32 %r2, [saxpy_param_3]",
            "mov.u32 %r3, %ctaid.x",
            "mov.u32 %r4, %ntid.x",
            "mov.u32 %r5, %tid.x",
            "mad.lo.s32 %r1, %r3, %r4, %r5",
            "setp.ge.s32 %p1, %r1, %r2",
            "@%p1 bra $L__BB0_2",
            "cvta.to.global.u64 %rd3, %rd2",
            "cvta.to.global.u64 %rd4, %rd1",
            "mul.wide.s32 %rd5, %r1, 4",
            "add.s64 %rd6, %rd4, %rd5",
            "ld.global.nc.f32 %f2, [%rd6]",
            "add.s64 %rd7, %rd3, %rd5",
            "ld.global.f32 %f3, [%rd7]",
            "fma.rn.f32 %f4, %f2, %f1, %f3",
            "st.global.f32 [%rd7], %f4",
            "$L__BB0_2:",
            "ret",
        ]
    );

    // The structure behind a few of those lines, spans included.
    let body = k.body.as_ref().unwrap();
    let Statement::Reg(r) = &body.statements[0] else {
        panic!()
    };
    assert_eq!(r.ty, ScalarType::Pred);
    assert_eq!(r.vector, 1);
    assert_eq!(r.names[0].name.value, "%p");
    assert_eq!(r.names[0].range, Some(2));
    assert_eq!(text(&f, r.span), ".reg .pred \t%p<2>");
    let ins = instructions(body);
    let mov = ins[4];
    assert_eq!(mov.opcode.value, "mov");
    assert_eq!(mov.modifiers.len(), 1);
    assert_eq!(mov.modifiers[0].value, "u32");
    assert_eq!(text(&f, mov.modifiers[0].span), ".u32");
    assert_eq!(
        mov.operands[1].kind,
        OperandKind::Ident {
            name: "%ctaid".into(),
            component: Some('x')
        }
    );
    assert_eq!(text(&f, mov.operands[1].span), "%ctaid.x");
    assert_eq!(text(&f, mov.span), "mov.u32 \t%r3, %ctaid.x");
    let bra = ins[9];
    assert_eq!(
        bra.guard,
        Some(Guard {
            negated: false,
            pred: Spanned {
                value: "%p1".into(),
                span: bra.guard.as_ref().unwrap().pred.span
            }
        })
    );
    assert_eq!(text(&f, bra.guard.as_ref().unwrap().pred.span), "%p1");
    assert_eq!(bra.operands[0].kind, ident("$L__BB0_2"));
    let ld = ins[0];
    let OperandKind::Address { base, offset } = &ld.operands[1].kind else {
        panic!("{:?}", ld.operands[1])
    };
    assert_eq!(base.as_ref().unwrap().name, "saxpy_param_0");
    assert_eq!(text(&f, base.as_ref().unwrap().span), "saxpy_param_0");
    assert_eq!(*offset, 0);
    assert_eq!(text(&f, ld.operands[1].span), "[saxpy_param_0]");
    assert_eq!(ld.operands.len(), 2);
    let mul = ins[12];
    assert_eq!(mul.operands[2].kind, OperandKind::Int(4));
}

#[test]
fn reduce_shared_memory_warp_ops_and_predicates() {
    let (f, m) = load("reduce_shared.ptx");
    assert_eq!(m.target, ["sm_80"]);
    let dyn_smem = var(&m, "dyn_smem");
    assert_eq!(
        (
            dyn_smem.linkage,
            dyn_smem.space,
            dyn_smem.align,
            dyn_smem.ty
        ),
        (
            Some(Linkage::Extern),
            StateSpace::Shared,
            Some(16),
            ScalarType::B8
        )
    );
    assert_eq!(dyn_smem.array_dims, [None]);
    assert_eq!(dyn_smem.init, None);
    assert_eq!(
        text(&f, dyn_smem.span),
        ".extern .shared .align 16 .b8 dyn_smem[]"
    );
    assert_eq!(text(&f, dyn_smem.name.span), "dyn_smem");

    let k = function(&m, "_Z6reducePK6float4PfPii");
    let p0 = &k.params[0];
    assert_eq!(p0.ty, ScalarType::U64);
    assert_eq!(p0.ptr_space, Some(StateSpace::Global));
    assert_eq!(p0.align, Some(16));
    assert_eq!(p0.array_len, None);
    assert_eq!(k.params[1].ptr_space, None);
    assert_eq!(
        k.performance
            .iter()
            .map(|p| p.value.clone())
            .collect::<Vec<_>>(),
        [
            Performance::ReqNtid(vec![128, 1, 1]),
            Performance::MinNctaPerSm(2)
        ]
    );

    let body = k.body.as_ref().unwrap();
    let Statement::Var(smem) = &body.statements[4] else {
        panic!("{:?}", body.statements[4])
    };
    assert_eq!(
        (smem.linkage, smem.space, smem.align, smem.vector, smem.ty),
        (None, StateSpace::Shared, Some(4), 1, ScalarType::B8)
    );
    assert_eq!(smem.name.value, "_ZZ6reducePK6float4PfPiiE4smem");
    assert_eq!(smem.array_dims, [Some(512)]);

    let lines = body_lines(k);
    let expect = [
        "ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd5-16]",
        "shfl.sync.bfly.b32 %r5|%p1, %r4, 16, 31, -1",
        "setp.gt.f32 %p2, %f6, 0f00000000",
        "vote.sync.ballot.b32 %r6, %p2, -1",
        "mov.u32 %r8, _ZZ6reducePK6float4PfPiiE4smem",
        "st.shared.v2.f32 [dyn_smem+8], {%f3, %f4}",
        "bar.sync 0",
        "setp.eq.and.s32 %p4, %r3, 0, !%p3",
        "@!%p4 bra $L__BB0_2",
        "ld.shared.f32 %f7, [_ZZ6reducePK6float4PfPiiE4smem+4]",
        "atom.global.add.f32 %f8, [%rd6], %f7",
        "atom.global.add.u32 %r10, [%rd8], 1",
        "red.global.add.u32 [%rd8+4], %r6",
    ];
    for e in expect {
        assert!(lines.iter().any(|l| l == e), "missing `{e}` in {lines:#?}");
    }

    let ins = instructions(body);
    let find = |opcode: &str, first_mod: &str| {
        *ins.iter()
            .find(|i| {
                i.opcode.value == opcode
                    && i.modifiers.first().map_or("", |m| m.value.as_str()) == first_mod
            })
            .unwrap()
    };
    let ld = find("ld", "global");
    let mods: Vec<&str> = ld.modifiers.iter().map(|m| m.value.as_str()).collect();
    assert_eq!(mods, ["global", "nc", "v4", "f32"]);
    let OperandKind::Vector(v) = &ld.operands[0].kind else {
        panic!()
    };
    assert_eq!(v.len(), 4);
    assert_eq!(v[3].kind, ident("%f4"));
    assert_eq!(text(&f, v[3].span), "%f4");
    assert_eq!(text(&f, ld.operands[0].span), "{%f1, %f2, %f3, %f4}");
    let OperandKind::Address { base, offset } = &ld.operands[1].kind else {
        panic!()
    };
    assert_eq!(base.as_ref().unwrap().name, "%rd5");
    assert_eq!(text(&f, base.as_ref().unwrap().span), "%rd5");
    assert_eq!(*offset, -16);
    assert_eq!(text(&f, ld.operands[1].span), "[%rd5+-16]");

    let shfl = find("shfl", "sync");
    let OperandKind::PredPair(a, b) = &shfl.operands[0].kind else {
        panic!()
    };
    assert_eq!((a.value.as_str(), b.value.as_str()), ("%r5", "%p1"));
    assert_eq!((text(&f, a.span), text(&f, b.span)), ("%r5", "%p1"));
    assert_eq!(shfl.operands[4].kind, OperandKind::Int(-1));
    assert_eq!(text(&f, shfl.operands[4].span), "-1");

    let setp = ins
        .iter()
        .find(|i| i.opcode.value == "setp" && i.modifiers.len() == 3)
        .unwrap();
    let OperandKind::Not(inner) = &setp.operands[3].kind else {
        panic!()
    };
    assert_eq!(inner.kind, ident("%p3"));
    assert_eq!(text(&f, setp.operands[3].span), "!%p3");

    let bra = find("bra", "");
    let g = bra.guard.as_ref().unwrap();
    assert!(g.negated);
    assert_eq!(g.pred.value, "%p4");
    assert_eq!(text(&f, bra.span), "@!%p4 bra \t$L__BB0_2");
}

#[test]
fn device_functions_calls_initializers_and_debug_info() {
    let (f, m) = load("device_call.ptx");
    assert_eq!(m.version, (7, 8));
    assert_eq!(m.target, ["sm_75"]);

    let coeffs = var(&m, "coeffs");
    assert_eq!(coeffs.space, StateSpace::Const);
    assert_eq!(coeffs.array_dims, [Some(16)]);
    let Some(Initializer::List(items)) = &coeffs.init else {
        panic!()
    };
    let bytes: Vec<i128> = items
        .iter()
        .map(|i| match i {
            Initializer::Expr(Spanned {
                value: InitExpr::Int(v),
                ..
            }) => *v,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        bytes,
        [0, 0, 128, 63, 0, 0, 32, 64, 0, 0, 64, 192, 0, 0, 0, 62]
    );

    let table = var(&m, "table");
    assert_eq!(table.ty, ScalarType::U32);
    assert_eq!(table.array_dims, [Some(2), Some(3)]);
    let Some(Initializer::List(rows)) = &table.init else {
        panic!()
    };
    assert_eq!(rows.len(), 2);
    let Initializer::List(row1) = &rows[1] else {
        panic!()
    };
    let Initializer::Expr(last) = &row1[2] else {
        panic!()
    };
    assert_eq!(last.value, InitExpr::Int(-6));
    assert_eq!(text(&f, last.span), "-6");

    let Some(Initializer::Expr(e)) = &var(&m, "scale").init else {
        panic!()
    };
    assert_eq!(e.value, InitExpr::Float(FloatLit::F32(0x3FC0_0000)));
    let Some(Initializer::List(w)) = &var(&m, "weights").init else {
        panic!()
    };
    assert_eq!(
        w,
        &[
            Initializer::Expr(Spanned {
                value: InitExpr::Float(FloatLit::F64(0x3FF8_0000_0000_0000)),
                span: match &w[0] {
                    Initializer::Expr(s) => s.span,
                    _ => panic!(),
                }
            }),
            Initializer::Expr(Spanned {
                value: InitExpr::Float(FloatLit::F64(1.5f64.to_bits())),
                span: match &w[1] {
                    Initializer::Expr(s) => s.span,
                    _ => panic!(),
                }
            }),
        ]
    );
    let Some(Initializer::Expr(e)) = &var(&m, "tptr").init else {
        panic!()
    };
    assert_eq!(
        e.value,
        InitExpr::SymbolAddr {
            name: "table".into(),
            generic: true,
            offset: 4
        }
    );
    assert_eq!(text(&f, e.span), "generic(table)+4");
    let Some(Initializer::Expr(e)) = &var(&m, "plain").init else {
        panic!()
    };
    assert_eq!(
        e.value,
        InitExpr::SymbolAddr {
            name: "table".into(),
            generic: false,
            offset: 0
        }
    );

    // A prototype: return parameter, no body.
    let helper = function(&m, "_Z6helperfi");
    assert_eq!(helper.kind, FunctionKind::Func);
    assert_eq!(helper.linkage, None);
    assert_eq!(helper.body, None);
    assert_eq!(helper.returns.len(), 1);
    assert_eq!(helper.returns[0].name.value, "func_retval0");
    assert_eq!(helper.returns[0].ty, ScalarType::B32);
    assert_eq!(helper.params.len(), 2);
    assert!(text(&f, helper.span).ends_with(")"));

    let nops = function(&m, "_Z4nopsv");
    assert_eq!(nops.linkage, Some(Linkage::Weak));
    assert!(nops.params.is_empty());
    assert_eq!(body_lines(nops), ["ret"]);

    let k = function(&m, "_Z4calli");
    assert_eq!(
        body_lines(k),
        [
            "var Local B8 __local_depot2[Some(8)]",
            "reg B64 %SP",
            "reg B64 %SPL",
            "reg F32 %f<3>",
            "reg B32 %r<3>",
            "reg v4 F32 %v",
            "$L__func_begin2:",
            "mov.u64 %SPL, __local_depot2",
            "ld.param.u32 %r1, [_Z4calli_param_0]",
            "pragma nounroll",
            "mov.f32 %f1, 0fBF800000",
            "{",
            "reg B32 temp_param_reg",
            "var Param B32 param0[]",
            "st.param.f32 [param0], %f1",
            "var Param B32 param1[]",
            "st.param.b32 [param1], %r1",
            "var Param B32 retval0[]",
            "call.uni (retval0), _Z6helperfi, (param0, param1)",
            "ld.param.f32 %f2, [retval0]",
            "}",
            "{",
            "call.uni _Z4nopsv, ()",
            "}",
            "st.local.f32 [%SPL], %f2",
            "st.local.u32 [%SPL-4], %r1",
            "ld.global.u32 %r2, [256]",
            "ret",
            "$L__func_end2:",
        ]
    );
    let body = k.body.as_ref().unwrap();
    let Statement::Block(call_block) = &body.statements[11] else {
        panic!()
    };
    assert!(text(&f, call_block.span).starts_with("{ // callseq 0, 0"));
    assert!(text(&f, call_block.span).ends_with("}"));
    let call = instructions(call_block)
        .into_iter()
        .find(|i| i.opcode.value == "call")
        .unwrap();
    assert_eq!(call.operands.len(), 3);
    assert_eq!(
        call.operands[0].kind,
        OperandKind::List(vec![Operand {
            kind: ident("retval0"),
            span: match &call.operands[0].kind {
                OperandKind::List(v) => v[0].span,
                _ => panic!(),
            }
        }])
    );
    assert_eq!(call.operands[1].kind, ident("_Z6helperfi"));
    assert_eq!(
        text(&f, call.operands[2].span),
        "(\n\tparam0, \n\tparam1\n\t)"
    );
    let Statement::Pragma(p) = &body.statements[9] else {
        panic!()
    };
    assert_eq!(text(&f, p.span), ".pragma \"nounroll\"");
}

#[test]
fn real_nvrtc_debug_output_skips_sections() {
    let (_, m) = load("nvrtc12_sm70_debug.ptx");
    assert_eq!(m.version, (8, 8));
    assert_eq!(m.target, ["sm_70", "debug"]);
    let names: Vec<&str> = m
        .items
        .iter()
        .map(|i| match i {
            Item::Function(f) => f.name.value.as_str(),
            Item::Var(v) => v.name.value.as_str(),
        })
        .collect();
    assert_eq!(
        names,
        [
            "vprintf",
            "_Z9atomicAddPii",
            "_Z9atomicAddPff",
            "_Z13__ballot_syncji",
            "_Z15__shfl_xor_syncjfii",
            "__int_as_float",
            "__float_as_int",
            "__iAtomicAdd",
            "__fAtomicAdd",
            "coeffs",
            "table",
            "tptr",
            "dyn",
            "$str",
            "_Z6helperfi",
            "saxpy",
            "reduce",
            "_Z9atomicAddPii",
            "_Z9atomicAddPff",
            "_Z13__ballot_syncji",
            "_Z15__shfl_xor_syncjfii",
            "__int_as_float",
            "__float_as_int",
            "__iAtomicAdd",
            "__fAtomicAdd"
        ]
    );
    // At -G the helpers are declared first (no body) and defined after the kernels.
    let defined = m
        .items
        .iter()
        .filter(|i| matches!(i, Item::Function(f) if f.body.is_some()))
        .count();
    assert_eq!(defined, 11);
    let vprintf = function(&m, "vprintf");
    assert_eq!(vprintf.linkage, Some(Linkage::Extern));
    assert!(vprintf.body.is_none());
    let ballot = m
        .items
        .iter()
        .find_map(|i| match i {
            Item::Function(f) if f.name.value == "_Z13__ballot_syncji" && f.body.is_some() => {
                Some(f)
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(
        body_lines(ballot),
        [
            "reg Pred %p<3>",
            "reg B32 %r<4>",
            "ld.param.u32 %r1, [_Z13__ballot_syncji_param_0]",
            "ld.param.u32 %r2, [_Z13__ballot_syncji_param_1]",
            "setp.ne.s32 %p1, %r2, 0",
            "vote.sync.ballot.b32 %r3, %p1, %r1",
            "st.param.b32 [func_retval0], %r3",
            "ret",
            "$L__func_end5:",
        ]
    );
}

#[test]
fn real_nvrtc13_indirect_calls_textures_and_attributes() {
    let (_, m) = load("nvrtc13_sm90_indirect_tex.ptx");
    assert_eq!(m.version, (9, 5));
    assert_eq!(m.target, ["sm_90"]);
    let managed = var(&m, "managed_counter");
    assert_eq!(
        (managed.space, managed.align, managed.ty),
        (StateSpace::Global, Some(4), ScalarType::U32)
    );
    let k1 = function(&m, "k1");
    assert!(k1
        .performance
        .iter()
        .any(|p| p.value == Performance::MinNctaPerSm(4)));
    let lines = body_lines(k1);
    assert!(lines.iter().any(|l| l == "prototype_0: prototype 1 -> 1"));
    assert!(lines
        .iter()
        .any(|l| l == "call (retval0), %rd11, (param0), prototype_0"));
    assert!(lines
        .iter()
        .any(|l| l == "tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd4, {%f3, %f3}]"));
    assert!(lines.iter().any(|l| l == "reg F16 low, high"));
}

#[test]
fn real_nvrtc13_cluster_and_register_limits() {
    let (_, m) = load("nvrtc13_sm90_cluster.ptx");
    let perf = |name: &str| -> Vec<Performance> {
        function(&m, name)
            .performance
            .iter()
            .map(|p| p.value.clone())
            .collect()
    };
    assert_eq!(
        perf("k3"),
        [
            Performance::Other("explicitcluster".into()),
            Performance::Other("reqnctapercluster 2, 1, 1".into())
        ]
    );
    assert_eq!(perf("k4"), [Performance::MaxNreg(64)]);
    assert_eq!(
        perf("k5"),
        [
            Performance::MaxNtid(vec![64, 1, 1]),
            Performance::MinNctaPerSm(1),
            Performance::Other("maxclusterrank 2".into())
        ]
    );
}

#[test]
fn real_nvrtc12_math_library_and_pointer_initializers() {
    let (_, m) = load("nvrtc12_sm70_math.ptx");
    let init = |name: &str| match &var(&m, name).init {
        Some(Initializer::Expr(e)) => vec![e.value.clone()],
        Some(Initializer::List(items)) => items
            .iter()
            .map(|i| match i {
                Initializer::Expr(e) => e.value.clone(),
                other => panic!("{other:?}"),
            })
            .collect(),
        None => vec![],
    };
    let sym = |offset| InitExpr::SymbolAddr {
        name: "arr".into(),
        generic: true,
        offset,
    };
    assert_eq!(init("ptrs"), [sym(0), sym(4), sym(12)]);
    assert_eq!(
        init("msg"),
        [InitExpr::SymbolAddr {
            name: "$str".into(),
            generic: true,
            offset: 0
        }]
    );
    assert_eq!(init("big"), [InitExpr::Int(-9_223_372_036_854_775_807)]);
    assert_eq!(var(&m, "big").space, StateSpace::Const);
    assert_eq!(var(&m, "__cudart_sin_cos_coeffs").array_dims, [Some(128)]);
    // The math library's slow path is an internal `.func` called from the kernel.
    // Declared (prototype) before the kernel, defined after it.
    let slow: Vec<bool> = m
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Function(f) if f.name.value == "__internal_trig_reduction_slowpathd" => {
                Some(f.body.is_some())
            }
            _ => None,
        })
        .collect();
    assert_eq!(slow, [false, true]);
    let k = function(&m, "m1");
    let calls: Vec<String> = instructions(k.body.as_ref().unwrap())
        .into_iter()
        .filter(|i| i.opcode.value == "call")
        .map(|i| op(&i.operands[1]))
        .collect();
    assert!(calls
        .iter()
        .any(|c| c == "__internal_trig_reduction_slowpathd"));
}
