//! The persistent schedule: each program walks several tiles of the launch's grid.
//!
//! The kernel is lowered as for one program, then its body (all but the prologue, which
//! depends on the thread alone) becomes the body of a loop over tiles:
//!
//! ```text
//! prologue                          (thread coordinates, constants, parameters)
//! tile = program_id(0)              (the launched program: the runtime launches as many
//! while tile < gx * gy * gz:         as the device holds at once)
//!     pid = (tile % gx, tile / gx % gy, tile / (gx * gy))
//!     body, with program_id(a) = pid[a] and num_programs(a) = (gx, gy, gz)[a]
//!     barrier                       (the next tile may reuse this one's shared memory)
//!     tile += num_programs(0)
//! ```
//!
//! A warp-specialized kernel (`specialize`) gets one such loop on each side instead, around
//! the side's statements and a copy of what comes before them (register arithmetic), and no
//! barrier of the whole program: the consumers end a tile at a named barrier of theirs,
//! and the producer goes on to the next tile's copies at once, the ring's mbarriers keeping
//! the two in step.
//!
//! `gx, gy, gz`, the grid the launch asked for, are three parameters after the kernel's own
//! ([`PersistentGrid`]). Tiles go to programs in the order of program ids, so a kernel's
//! own tile order (the matmul's grouped order) is kept: the programs running at once take
//! consecutive tiles, as a full wave of the plain grid would.
//!
//! What this buys is the launch and program start-up of every tile after a program's first,
//! and a grid whose last wave is not partial; what it cannot do by itself is overlap one
//! tile's epilogue with the next tile's loads, which needs the copies issued by warps of
//! their own (`specialize`).
//!
//! A kernel whose programs wait for each other (a spin lock on a flag another program sets)
//! may wait for a tile that the same program would only run later: such a kernel must not
//! be made persistent.

use crate::ir::{BinaryOp, CmpOp};
use crate::thread::{Expr, PersistentGrid, Reg, RegData, Special, Stmt, ThreadKernel, ThreadParam};
use crate::types::ScalarType;

/// The names of the parameters that hold the logical grid.
pub const GRID_PARAMS: [&str; 3] = ["rutile_grid_x", "rutile_grid_y", "rutile_grid_z"];

/// Makes `kernel` persistent; its first `prologue` statements run once per program.
pub(super) fn make_persistent(kernel: &mut ThreadKernel, prologue: usize) -> Result<(), String> {
    let per_tile = kernel.body.split_off(prologue.min(kernel.body.len()));
    let mut reads_program = false;
    crate::thread::walk_stmts(&kernel.body, &mut |s| {
        reads_program |= matches!(
            s,
            Stmt::Set {
                expr: Expr::Special(Special::ProgramId(_) | Special::NumPrograms(_)),
                ..
            }
        )
    });
    if reads_program {
        return Err("the prologue reads the program id".into());
    }
    let first = kernel.params.len() as u32;
    for name in GRID_PARAMS {
        if kernel.params.iter().any(|p| p.name() == name) {
            return Err(format!(
                "a kernel parameter is named `{name}`, which the persistent schedule uses"
            ));
        }
        kernel.params.push(ThreadParam::Scalar {
            name: name.into(),
            ty: ScalarType::I32,
        });
    }
    let mut setup = Vec::new();
    let g: Vec<Reg> = (0..3)
        .map(|a| set(kernel, &mut setup, Expr::Param(first + a)))
        .collect();
    let gxy = set(kernel, &mut setup, Expr::Binary(BinaryOp::Mul, g[0], g[1]));
    let grid = Grid {
        g: [g[0], g[1], g[2]],
        gxy,
        total: set(kernel, &mut setup, Expr::Binary(BinaryOp::Mul, gxy, g[2])),
        tile: set(kernel, &mut setup, Expr::Special(Special::ProgramId(0))),
        programs: set(kernel, &mut setup, Expr::Special(Special::NumPrograms(0))),
    };
    kernel.body.append(&mut setup);
    kernel.persistent = Some(PersistentGrid {
        grid_params: [first, first + 1, first + 2],
    });
    let mut per_tile = per_tile;
    match per_tile.pop() {
        // Each side walks the tiles on its own, the statements before the specialization
        // (register arithmetic) repeated in both: a loop around both would keep what one
        // side uses live in the other's registers too, a producer's few among them. The
        // register budgets are set once, before the sides' loops.
        Some(Stmt::Specialized { producer, consumer }) => {
            let side = |k: &mut ThreadKernel, mut stmts: Vec<Stmt>| {
                let head: Vec<Stmt> = match stmts.first() {
                    Some(Stmt::SetMaxRegisters { .. }) => vec![stmts.remove(0)],
                    _ => vec![],
                };
                let mut body = per_tile.clone();
                body.append(&mut stmts);
                let mut out = head;
                out.push(tile_loop(k, &grid, body, false));
                out
            };
            let producer = side(kernel, producer);
            let consumer = side(kernel, consumer);
            kernel.body.push(Stmt::Specialized { producer, consumer });
        }
        last => {
            per_tile.extend(last);
            let tiles = tile_loop(kernel, &grid, per_tile, true);
            kernel.body.push(tiles);
        }
    }
    Ok(())
}

/// The registers that walk the launch's grid.
struct Grid {
    g: [Reg; 3],
    gxy: Reg,
    total: Reg,
    /// The tile this program runs now: its own id first.
    tile: Reg,
    programs: Reg,
}

/// `while tile < total { pid = ...; body; [barrier]; tile += programs }`, the body reading
/// the tile's program ids and the grid's size where it read the launched program's.
fn tile_loop(kernel: &mut ThreadKernel, grid: &Grid, mut per_tile: Vec<Stmt>, barrier: bool) -> Stmt {
    let (g, tile) = (grid.g, grid.tile);
    let more = kernel.regs.append(RegData { ty: ScalarType::Bool });
    let cond_body = vec![Stmt::Set {
        dst: more,
        expr: Expr::Compare(CmpOp::Lt, tile, grid.total),
    }];
    let mut body = Vec::new();
    let pid0 = set(kernel, &mut body, Expr::Binary(BinaryOp::Rem, tile, g[0]));
    let row = set(kernel, &mut body, Expr::Binary(BinaryOp::Div, tile, g[0]));
    let pid1 = set(kernel, &mut body, Expr::Binary(BinaryOp::Rem, row, g[1]));
    let pid2 = set(kernel, &mut body, Expr::Binary(BinaryOp::Div, tile, grid.gxy));
    let pid = [pid0, pid1, pid2];
    crate::thread::walk_stmts_mut(&mut per_tile, &mut |s| match s {
        Stmt::Set { expr, .. } => match *expr {
            Expr::Special(Special::ProgramId(a)) => *expr = Expr::Copy(pid[a as usize % 3]),
            Expr::Special(Special::NumPrograms(a)) => *expr = Expr::Copy(g[a as usize % 3]),
            _ => {}
        },
        // `device_print` names the tile, not the launched program.
        Stmt::Print { program, .. } => *program = Some(pid),
        _ => {}
    });
    body.append(&mut per_tile);
    if barrier {
        body.push(Stmt::Barrier);
    }
    let next = set(kernel, &mut body, Expr::Binary(BinaryOp::Add, tile, grid.programs));
    body.push(Stmt::Set {
        dst: tile,
        expr: Expr::Copy(next),
    });
    Stmt::While {
        cond_body,
        cond: more,
        body,
    }
}

/// `dst = expr` appended to `list`, `dst` a new i32 register.
fn set(kernel: &mut ThreadKernel, list: &mut Vec<Stmt>, expr: Expr) -> Reg {
    let dst = kernel.regs.append(RegData { ty: ScalarType::I32 });
    list.push(Stmt::Set { dst, expr });
    dst
}
