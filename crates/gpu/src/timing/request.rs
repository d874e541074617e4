//! [`Machine::request`]: the one entry point through which a control changes what runs
//! where (the protocol is [`super::control`]). Each verb checks its SM, TB, warp or hold,
//! asks the SM, keeps the launch's books (resident, held, finished TBs; local-memory frames)
//! and queues the acknowledgement.

use kir::Id;

use super::backend::MemoryBackend;
use super::context::TbContext;
use super::control::{
    ControlError, Direction, Refused, Request, Routine, Scope, Start, TbCheckpoint, TbControl,
    Ticket,
};
use super::ids::{HoldId, LaunchId, SmId, TbRef, TransferId};
use super::machine::{Event, Machine};

impl<B: MemoryBackend> Machine<B> {
    /// Carries out `request` (see [`Request`] for each verb's acknowledgement), or refuses it
    /// and hands it back.
    pub fn request(&mut self, request: Request) -> Result<Ticket, Refused> {
        let sm = request.sm();
        if sm.index() >= self.sms.len() {
            return Err(Refused {
                error: ControlError::NoSuchSm { sm },
                request: Box::new(request),
            });
        }
        // The verbs that carry something the caller must get back on a refusal.
        let request = match request {
            Request::Install {
                sm,
                context,
                into,
                start,
            } => return self.install(sm, context, into, start),
            other => other,
        };
        let outcome = match &request {
            &Request::Dispatch { sm, launch } => self.dispatch(sm, launch),
            Request::Install { .. } => unreachable!("handled above"),
            &Request::Stop {
                sm,
                tb,
                at,
                then,
                reports,
            } => self.sms[sm.index()]
                .stop(&self.launches, tb, at, then, reports)
                .map(|()| Ticket::Tb(tb)),
            &Request::Resume { sm, tb } => self.sms[sm.index()]
                .resume(&self.launches, tb)
                .map(|()| self.ack(Event::TbResumed { cycle: 0, sm, tb }, Ticket::Tb(tb))),
            &Request::Evict { sm, tb, then } => self.evict(sm, tb, then),
            &Request::Discard { sm, tb } => self.discard(sm, tb),
            &Request::Hold { sm, launch } => self.hold(sm, launch),
            &Request::Release { sm, hold } => self.sms[sm.index()].release(hold).map(|()| {
                self.ack(
                    Event::HoldReleased { cycle: 0, sm, hold },
                    Ticket::Hold(hold),
                )
            }),
            &Request::Park { sm, hold, keep } => self.sms[sm.index()]
                .park(hold, keep)
                .map(|()| self.ack(Event::HoldParked { cycle: 0, sm, hold }, Ticket::Hold(hold))),
            &Request::Unpark { sm, hold } => self.sms[sm.index()].unpark(hold).map(|()| {
                self.ack(
                    Event::HoldUnparked { cycle: 0, sm, hold },
                    Ticket::Hold(hold),
                )
            }),
            &Request::Transfer {
                sm,
                direction,
                base,
                bytes,
                launch,
                not_before,
            } => Ok(Ticket::Transfer(
                self.transfer(sm, direction, base, bytes, launch, not_before),
            )),
            &Request::Routine {
                sm,
                tb,
                warp,
                routine,
            } => self.routine(sm, tb, warp, routine),
            &Request::HoldWarp { sm, tb, warp } => self.sms[sm.index()]
                .hold_warp(&self.launches, tb, warp)
                .map(|()| {
                    self.ack(
                        Event::WarpHeld {
                            cycle: 0,
                            sm,
                            tb,
                            warp,
                        },
                        Ticket::Tb(tb),
                    )
                }),
            &Request::ReleaseWarp { sm, tb, warp } => self.sms[sm.index()]
                .release_warp(&self.launches, tb, warp)
                .map(|()| {
                    self.ack(
                        Event::WarpReleased {
                            cycle: 0,
                            sm,
                            tb,
                            warp,
                        },
                        Ticket::Tb(tb),
                    )
                }),
            &Request::Checkpoint {
                sm,
                tb,
                scope,
                base,
            } => self.checkpoint(sm, tb, scope, base),
            Request::Rollback { sm, tb, chain } => self.rollback(*sm, *tb, chain),
            &Request::CountBlocks { sm, launch, every } => {
                if launch.index() >= self.launches.len() {
                    Err(ControlError::UnknownLaunch {
                        tb: TbRef { launch, index: 0 },
                    })
                } else {
                    self.sms[sm.index()].count_blocks(launch, every);
                    Ok(self.ack(
                        Event::BlockCountSet {
                            cycle: 0,
                            sm,
                            launch,
                        },
                        Ticket::Launch(launch),
                    ))
                }
            }
            &Request::Limit { sm, launch, limits } => {
                if launch.index() >= self.launches.len() {
                    Err(ControlError::UnknownLaunch {
                        tb: TbRef { launch, index: 0 },
                    })
                } else {
                    self.sms[sm.index()].set_limits(launch, limits);
                    Ok(self.ack(
                        Event::LimitsSet {
                            cycle: 0,
                            sm,
                            launch,
                        },
                        Ticket::Launch(launch),
                    ))
                }
            }
        };
        outcome.map_err(|error| Refused {
            error,
            request: Box::new(request),
        })
    }

    /// Queues `event`, stamped with the current cycle, and answers `ticket`.
    fn ack(&mut self, mut event: Event, ticket: Ticket) -> Ticket {
        let now = self.cycle();
        match &mut event {
            Event::TbResumed { cycle, .. }
            | Event::HoldTaken { cycle, .. }
            | Event::HoldReleased { cycle, .. }
            | Event::HoldParked { cycle, .. }
            | Event::HoldUnparked { cycle, .. }
            | Event::WarpHeld { cycle, .. }
            | Event::WarpReleased { cycle, .. }
            | Event::TbRolledBack { cycle, .. }
            | Event::LimitsSet { cycle, .. }
            | Event::TbDispatched { cycle, .. }
            | Event::TbDiscarded { cycle, .. }
            | Event::TbRestored { cycle, .. } => *cycle = now,
            _ => {}
        }
        self.events.push(event);
        ticket
    }

    /// A launch that has TBs to place, or the error naming `tb` of it.
    fn live_launch(&self, tb: TbRef) -> Result<&super::Launch, ControlError> {
        match self.launches.get(tb.launch.index()) {
            Some(l) if l.finished_at.is_none() => Ok(l),
            _ => Err(ControlError::UnknownLaunch { tb }),
        }
    }

    fn dispatch(&mut self, sm: SmId, launch: LaunchId) -> Result<Ticket, ControlError> {
        let tb = match self.launches.get(launch.index()) {
            Some(l) => l.next(launch),
            None => TbRef { launch, index: 0 },
        };
        if self.live_launch(tb)?.undispatched() == 0 {
            return Err(ControlError::UnknownLaunch { tb });
        }
        if !self.fits(sm, launch) {
            return Err(ControlError::NoRoom { sm, tb });
        }
        let now = self.cycle();
        let l = &mut self.launches[launch.index()];
        let frame = l.take_frame(&mut self.mem);
        l.take_next();
        l.resident += 1;
        l.started_at.get_or_insert(now);
        self.sms[sm.index()].dispatch(&self.launches[launch.index()], tb, frame, now);
        Ok(self.ack(Event::TbDispatched { cycle: 0, sm, tb }, Ticket::Tb(tb)))
    }

    fn install(
        &mut self,
        sm: SmId,
        context: Box<TbContext>,
        into: Option<HoldId>,
        start: Start,
    ) -> Result<Ticket, Refused> {
        let tb = context.tb;
        let check = (|| {
            let l = self.live_launch(tb)?;
            if l.held == 0 {
                return Err(ControlError::UnknownLaunch { tb });
            }
            if let Some(hold) = into {
                self.sms[sm.index()].restoring(hold)?;
            }
            Ok(())
        })();
        if let Err(error) = check {
            return Err(Refused {
                error,
                request: Box::new(Request::Install {
                    sm,
                    context,
                    into,
                    start,
                }),
            });
        }
        if let Some(hold) = into {
            // The hold's resources are the TB's (checked restoring above).
            let _ = self.sms[sm.index()].release(hold);
            self.events.push(Event::HoldReleased {
                cycle: self.cycle(),
                sm,
                hold,
            });
        }
        if !self.fits(sm, tb.launch) {
            return Err(Refused {
                error: ControlError::NoRoom { sm, tb },
                request: Box::new(Request::Install {
                    sm,
                    context,
                    into: None,
                    start,
                }),
            });
        }
        let now = self.cycle();
        let l = &mut self.launches[tb.launch.index()];
        l.held -= 1;
        l.resident += 1;
        let control = match start {
            Start::Running => TbControl::Running,
            Start::Stopped => TbControl::Stopped,
        };
        self.sms[sm.index()].install(&self.launches[tb.launch.index()], context, control, now);
        Ok(self.ack(Event::TbRestored { cycle: 0, sm, tb }, Ticket::Tb(tb)))
    }

    fn evict(
        &mut self,
        sm: SmId,
        tb: TbRef,
        then: super::AfterStop,
    ) -> Result<Ticket, ControlError> {
        let now = self.cycle();
        let (context, hold) = self.sms[sm.index()].evict(tb, then, now)?;
        self.left(sm, context, hold, now);
        Ok(Ticket::Tb(tb))
    }

    fn discard(&mut self, sm: SmId, tb: TbRef) -> Result<Ticket, ControlError> {
        let frame = self.sms[sm.index()].discard(tb)?;
        let l = &mut self.launches[tb.launch.index()];
        l.resident -= 1;
        l.give_frame(frame);
        l.requeue(tb.index);
        Ok(self.ack(Event::TbDiscarded { cycle: 0, sm, tb }, Ticket::Tb(tb)))
    }

    fn hold(&mut self, sm: SmId, launch: LaunchId) -> Result<Ticket, ControlError> {
        let tb = TbRef { launch, index: 0 };
        let demand = self.live_launch(tb)?.demand;
        if !self.fits(sm, launch) {
            return Err(ControlError::NoRoom { sm, tb });
        }
        let hold = self.sms[sm.index()].hold(launch, &demand);
        Ok(self.ack(Event::HoldTaken { cycle: 0, sm, hold }, Ticket::Hold(hold)))
    }

    /// Queues a context transfer on `sm` (see [`Request::Transfer`]).
    pub(super) fn transfer(
        &mut self,
        sm: SmId,
        direction: Direction,
        base: u64,
        bytes: u64,
        launch: LaunchId,
        not_before: u64,
    ) -> TransferId {
        let memcfg = self.memory_config();
        let line = memcfg.line_bytes;
        let sectors = (memcfg.line_bytes / memsys::coalesce::SECTOR_BYTES) as u32;
        let full = if sectors >= 8 {
            u8::MAX
        } else {
            (1u8 << sectors) - 1
        };
        let first = base / line;
        let last = (base + bytes.max(1) - 1) / line;
        let lines = (first..=last)
            .map(|l| memsys::LineRequest {
                line_addr: l * line,
                sectors: full,
            })
            .collect();
        let kind = match direction {
            Direction::Save => memsys::AccessKind::Store,
            Direction::Restore => memsys::AccessKind::Load,
        };
        self.sms[sm.index()].transfer(kind, lines, launch, not_before)
    }

    fn routine(
        &mut self,
        sm: SmId,
        tb: TbRef,
        warp: u32,
        routine: Routine,
    ) -> Result<Ticket, ControlError> {
        let now = self.cycle();
        self.sms[sm.index()].start_routine(&self.launches, tb, warp, routine, now)?;
        Ok(Ticket::Tb(tb))
    }

    fn checkpoint(
        &mut self,
        sm: SmId,
        tb: TbRef,
        scope: Scope,
        base: u64,
    ) -> Result<Ticket, ControlError> {
        let now = self.cycle();
        let launch = self
            .launches
            .get(tb.launch.index())
            .ok_or(ControlError::UnknownLaunch { tb })?;
        let checkpoint = self.sms[sm.index()].capture_checkpoint(launch, tb, scope, now)?;
        let id = checkpoint.id;
        let transfer = self.transfer(sm, Direction::Save, base, checkpoint.bytes, tb.launch, now);
        self.sms[sm.index()].checkpoint_in_flight(transfer, checkpoint);
        Ok(Ticket::Checkpoint(id))
    }

    fn rollback(
        &mut self,
        sm: SmId,
        tb: TbRef,
        chain: &[TbCheckpoint],
    ) -> Result<Ticket, ControlError> {
        let now = self.cycle();
        // What a register no checkpoint holds reads: recognisable, and different each time.
        let garbage = 0xdead_0000_0000_0000 ^ now.rotate_left(29);
        self.sms[sm.index()].rollback(&self.launches, tb, chain, garbage)?;
        Ok(self.ack(Event::TbRolledBack { cycle: 0, sm, tb }, Ticket::Tb(tb)))
    }
}
