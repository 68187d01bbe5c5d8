/*
 * railfence: the payout protocol as a Promela model, as it stands after the money-safety changes
 * (pre-forward budget, late answers recorded and flagged, the reconciler watching its NOT_PAID
 * verdicts, payout binding with fence == token, one live submission per payout, executors that
 * list a payout's submissions before resubmitting, least-privilege roles).
 *
 * What is modelled (model/README.md maps every step to the code and SQL it stands for):
 *   - executors: acquire -> fence the payout row -> list the payout's submissions -> submit ->
 *     record; after a lost answer, settle from the ledger. Executor 1 is UNTRUSTED (INV-07): it
 *     may skip the lookup, ignore a refused fence and submit anyway, and pick any payout. It only
 *     uses the statements its paydb role is granted (least privilege): it never writes marks or
 *     submissions, and its payout writes are the fenced ones.
 *   - the lock: one account key, leases that expire by the model clock, strictly increasing tokens.
 *   - group admission (decision 068): two requests waiting on one replica admitted by one statement,
 *     item after item, in one atomic step, in either order (GROUPS bounds how often).
 *   - rail-proxy: a pool of request handlers running on REPLICAS replicas. Admission (mark,
 *     binding, one-live, primary key) is ONE atomic step; then the pre-forward budget check and
 *     the start of the rail call are one step (the residual window between them is a switch);
 *     then the answer or the deadline; then the outcome is recorded. A replica can crash between
 *     any two steps (its handlers die, its in-memory marks are lost); any step can stall for any
 *     number of clock ticks (nothing forces a process to move).
 *   - paydb: marks, intents (rail_submissions), payouts.
 *   - the sweeper, the reconciler (statement lag, settlement window, NOT_PAID watch), the rail
 *     (non-idempotent, books then may lose its answer, may never receive a call, may reject).
 *
 * Time is a model clock made of relative, saturating ages (lease age, intent age since
 * created_at, rail call age). A tick advances every running age by one; it saturates where no
 * rule can tell the difference any more, so the state space is finite and runs are unbounded.
 *
 * Compile-time switches (guards removed one at a time, the negative controls):
 *   -DNO_MARK        D7: admission does not depend on the high-water mark
 *   -DMARK_MEMORY    ADR-007's in-process mark map (failure i with -DREPLICAS=1 -DCRASHES=1,
 *                    failure ii with -DREPLICAS=2 -DCRASHES=0)
 *   -DGROUP_MARK_SNAPSHOT  a group admission judges every item by the mark as its statement first
 *                    saw it, not by what the items before it left
 *   -DNO_BUDGET      the rail call may start however long after admission
 *   -DNO_ONE_LIVE    a payout may have two live submissions
 *   -DNO_BINDING     the submission is not bound to its payout row (state, fence == token)
 *   -DNO_LOOKUP      honest executors do not list a payout's submissions before submitting
 *   -DRESIDUAL_WINDOW  a stall between the budget check and the bytes leaving (documented gap)
 *   -DUNKNOWN_AS_REJECTED  an answer with an undocumented status recorded as REJECTED (with
 *                    -DRAIL_UNKNOWN=1: the rail may book and answer such a status)
 *   -DNO_LATE_FLAG, -DNO_NOT_PAID_WATCH (with -DEND_STATE_ONLY): controls for the flag property
 *   -DNO_SWEEPER -DNO_RECONCILER: control for liveness (nothing ever closes an orphaned intent)
 *   -DUNCLOSED_ACCEPTED  the outcome statement records ACCEPTED without closing its payout (a proxy
 *                    from before decision 072, mid-rollout), and the executor still writes
 *                    nothing after ACCEPTED: the payout is left open although the rail paid it
 */

/* ---- bounds ---------------------------------------------------------------------------- */
#ifndef GROUPS
#define GROUPS 1        /* group admissions (two requests of one replica in one statement) in one run */
#endif
#ifndef REPLICAS
#define REPLICAS 2
#endif
#ifndef MAXTOK
#define MAXTOK 3        /* tokens the lock may issue in one run (= attempts in all) */
#endif
#ifndef CRASHES
#define CRASHES 1       /* replica crashes */
#endif
#ifndef RAIL_LOSE
#define RAIL_LOSE 1     /* rail books, then its answer is lost */
#endif
#ifndef RAIL_DROP
#define RAIL_DROP 1     /* the call never reaches the rail (never lands) */
#endif
#ifndef XLOST
#define XLOST 1         /* an executor gives up on a SubmitPayout answer (network, call timeout) */
#endif
#ifndef RAIL_UNKNOWN
#define RAIL_UNKNOWN 0  /* the rail books, then answers a status the protocol does not document */
#endif
#define NPAY 2
#define NEXEC 2
#define NT 5            /* token-indexed arrays: index 1..MAXTOK used */

#if MAXTOK > 4
#error MAXTOK must be at most 4
#endif

/* ---- time ----------------------------------------------------------------------------
 * Durations, in one unit (the defaults keep the ratios of the shipped configuration rules).
 * The model does not count ticks: each timer is a PHASE that the clock process advances, and
 * the configuration rules become ordering constraints on those advances (see the Clock). */
#ifndef BUDGET
#define BUDGET 1        /* RAIL_FORWARD_BUDGET_MS: latest intent age at which the call may start */
#endif
#ifndef MARGIN
#define MARGIN 2        /* AMBIGUITY_MARGIN_MS */
#endif
#ifndef DEADLINE
#define DEADLINE 1      /* RAIL_DEADLINE_MS */
#endif
#ifndef RAIL_LAG
/* A call reaches the rail, if at all, within 2 x the deadline of its start [M:rail-lag]: the request is written
 * on a connected session only, a call given up before its request was written resets the
 * connection, and a connection that answers no PING (one every deadline) is reset, discarding
 * what it could not deliver (rail-proxy/rail-client.ts). Before that transport, Node could send a
 * request queued on a connecting session at any time later: no bound at all. */
#define RAIL_LAG (2 * DEADLINE)
#endif
#ifndef WINDOW
#define WINDOW (2 * DEADLINE + MARGIN + 1)  /* SETTLEMENT_WINDOW_MS */
#endif
#define SWEEP_AGE (DEADLINE + MARGIN)   /* a FORWARDING intent older than this is ambiguous */

/* The configuration rules the guarantee rests on (config validation and the Helm schema). [M:config-relations]
 * -DALLOW_BAD_CONFIG lets a run break them, to see what they protect. */
#ifndef ALLOW_BAD_CONFIG
#if BUDGET >= MARGIN
#error RAIL_FORWARD_BUDGET must be below AMBIGUITY_MARGIN
#endif
#if MARGIN <= 0
#error AMBIGUITY_MARGIN must be positive
#endif
#if WINDOW <= 2 * DEADLINE + MARGIN
#error SETTLEMENT_WINDOW must exceed 2 x deadline + margin
#endif
#endif

/* Intent age phases (created_at is the admission). Only what someone observes is kept:
 *   P_OPEN   age <= SWEEP_AGE   not ambiguous. Whether it is still within BUDGET is observed
 *                               only by the call's own handler, at its budget check, which may
 *                               therefore always find the budget spent (it may have stalled).
 *   P_STALE  SWEEP_AGE < age <= WINDOW  the sweeper and the reconciler treat it as ambiguous
 *   P_LATE   age > WINDOW               a statement covering created_at + WINDOW may say NOT_PAID */
#define P_OPEN 0
#define P_STALE 1
#define P_LATE 2
/* What the relations guarantee, as constraints on the clock: a call started within the budget
 * has been decided by the rail (booked, rejected or lost) before the intent can become
 * P_LATE: BUDGET + RAIL_LAG < MARGIN + 2 x DEADLINE < WINDOW; and before P_STALE only where
 * BUDGET + RAIL_LAG < DEADLINE + MARGIN (not with the defaults: the sweeper may declare a row
 * whose request is still on its way ambiguous, which is what ambiguity is for). Its handler may
 * still stall for any time after that. */
#if BUDGET + RAIL_LAG < SWEEP_AGE
#define EARLY_CALL_ENDS_BEFORE_STALE 1
#else
#define EARLY_CALL_ENDS_BEFORE_STALE 0
#endif
#if BUDGET + RAIL_LAG <= WINDOW
#define EARLY_BOOKING_BEFORE_LATE 1
#else
#define EARLY_BOOKING_BEFORE_LATE 0
#endif
#if RAIL_LAG <= DEADLINE
#define RAIL_DECIDES_BEFORE_DEADLINE 1
#else
#define RAIL_DECIDES_BEFORE_DEADLINE 0
#endif

/* ---- states --------------------------------------------------------------------------- */
/* rail_submissions.state */
#define NONE 0
#define FWD 1       /* FORWARDING */
#define ACC 2       /* ACCEPTED */
#define REJ 3       /* REJECTED */
#define TMO 4       /* TIMEOUT */
#define RPAID 5     /* RESOLVED_PAID */
#define RNP 6       /* RESOLVED_NOT_PAID */
#define NOTFWD 7    /* NOT_FORWARDED */
/* payouts.state */
#define PEND 0
#define PROC 1
#define PAID 2
#define FAIL 3
#define UNK 4
#define ATTN 5      /* NEEDS_ATTENTION */
/* answers to SubmitPayout */
#define A_ACC 1
#define A_REJ 2
#define A_AMBIG 3       /* RAIL_AMBIGUOUS */
#define A_FENCED 4      /* FENCED_OUT */
#define A_BIND 5        /* PAYOUT_NOT_PAYABLE / PAYOUT_FENCE_MISMATCH */
#define A_LIVE 6        /* PAYOUT_ALREADY_SUBMITTED (names the live submission) */
#define A_DUP 7         /* DUPLICATE_SUBMISSION (primary key) */
#define A_NOTFWD 8      /* NOT_FORWARDED */
#define A_LEDGER 9      /* the row was no longer FORWARDING: the proxy answers what the ledger holds */
#define A_LOST 10       /* executor side: no answer */
#define A_UNK 11        /* rail side: an answer whose status the rail protocol does not document */

/* ---- paydb ---------------------------------------------------------------------------- */
byte mark;                    /* rail_high_water.mark (one account) */
byte rs[NT];                  /* rail_submissions.state, by token (reference <payout>:t<token>) */
bit  rp[NT];                  /* rail_submissions.bound_payout_id */
byte ph[NT];                  /* intent age phase (P_YOUNG .. P_LATE) */
bit  contra[NT];              /* NOT_PAID verdict contradicted by the statement, recorded */
byte ps[NPAY];                /* payouts.state */
byte pf[NPAY];                /* payouts.fence */
bit  flag[NPAY];              /* attention_reason set (late answer / contradicted NOT_PAID) */

/* ---- lock (lockdb row of the account key) ---------------------------------------------
 * Only the token counter is state. A live lease ends by Release or by its TTL passing; the
 * only observer of an expiry is the next Acquire, and a holder can always be stalled past its
 * TTL, so every Acquire may find the previous lease expired: the clock's expiry event is
 * folded into Acquire, and the holder keeps running with its old token (the stale holder). */
byte lasttok;                 /* highest token issued */

/* ---- rail ----------------------------------------------------------------------------- */
byte rq[NT];                  /* 0 no call, 1 call in flight to the rail, 2 the rail is done with it */
bit  cearly[NT];              /* the call started while the intent was P_YOUNG */
bit  callon[NT];              /* a handler is waiting for this call's answer */
byte rans[NT];                /* the rail's answer, on its way back to the handler */
bit  booked[NT];              /* the rail moved money for this submission */
bit  blate[NT];               /* ... when the intent was P_LATE or closed (a statement covering
                                 created_at + WINDOW may not show it) */
bit  rrej[NT];                /* the rail's statement shows it REJECTED */
byte lost, dropped, unknown;

/* ---- rail-proxy replicas, calls ------------------------------------------------------- */
byte mem[REPLICAS];           /* MARK_MEMORY: each replica's in-process mark */
byte epoch[REPLICAS];         /* bumped by a crash: handlers of the old epoch are dead */
byte hbusy[REPLICAS];         /* calls in progress on the replica */
byte crashes;
/* SubmitPayout calls, by token: each lease submits at most once, so a token names a call */
bit  qon[NT];                 /* the request was sent */
bit  qe[NT];                  /* by executor qe */
bit  qp[NT];                  /* for payout qp */
byte qr[NT];                  /* to replica qr */
byte qep[NT];                 /* whose epoch was qep when the call arrived */
byte qst[NEXEC];              /* executor e's wait: Q_IDLE, Q_WAIT, Q_ANSWERED, Q_DEAD */
byte qt[NEXEC];               /* ... for the token it waits on */
byte qans[NEXEC], qarg[NEXEC];
byte xlost;
/* Group admission (decision 068): requests admitted together by one statement; the Handler of
 * each takes its answer from here. */
bit  gdone[NT];               /* call t was admitted (or refused) by a group admission */
bit  ga_e[NT];                /* ... its executor */
bit  ga_p[NT];                /* ... its payout */
byte ga_code[NT], ga_arg[NT]; /* ... its answer */
byte groups;                  /* group admissions so far (bounded by GROUPS) */
byte gsnap;                   /* -DGROUP_MARK_SNAPSHOT: the mark as the group's statement first saw it */

/* ---- ghost state for the properties --------------------------------------------------- */
byte lastadm;                 /* last admitted token (INV-01) */
byte paid[NPAY];              /* rail bookings per payout (INV-02) */
byte ok_inv01_admitted_tokens_increase = 1;    /* 1 in every stored state unless violated */
byte ok_inv02_no_payout_paid_twice = 1;    /* 1 in every stored state unless violated */
byte ok_inv03_failed_payout_never_paid = 1;    /* 1 in every stored state unless violated */
byte ok_no_rail_payment_without_intent = 1;    /* 1 in every stored state unless violated */
byte ok_no_payment_after_not_paid = 1;    /* 1 in every stored state unless violated */
byte ok_payment_after_not_paid_is_flagged = 1;    /* 1 in every stored state unless violated */
byte ok_no_duplicate_alarm_for_honest_executor = 1;    /* 1 in every stored state unless violated */
byte ok_no_intent_left_forwarding = 1;    /* 1 in every stored state unless violated */
byte ok_accepted_payout_closed = 1;    /* 1 in every stored state unless violated */

#define Q_IDLE 0
#define Q_WAIT 1
#define Q_ANSWERED 2
#define Q_DEAD 3

/* Live: anything but a proven not-sent (REJECTED, NOT_FORWARDED). A NOT_PAID resolution is a
 * judgement and keeps the payout's submission live (migration 011; an operator's explicit
 * re-opening is not modelled). -DNOT_PAID_REOPENS: the old rule, where it ended it. [M:one-live] */
#ifdef NOT_PAID_REOPENS
#define LIVE(k, p) (rs[k] != NONE && rp[k] == p && rs[k] != REJ && rs[k] != RNP && rs[k] != NOTFWD)
#else
#define LIVE(k, p) (rs[k] != NONE && rp[k] == p && rs[k] != REJ && rs[k] != NOTFWD)
#endif
#define AMBIGUOUS(k) (rs[k] == TMO || (rs[k] == FWD && ph[k] >= P_STALE)) /* [M:ambiguous] */
#define PAYABLE(p) (ps[p] == PEND || ps[p] == PROC)
#define AGING(k) (rs[k] == FWD || rs[k] == TMO)
#define FOR_TOKENS(c) (c(1) || (MAXTOK >= 2 && c(2)) || (MAXTOK >= 3 && c(3)) || (MAXTOK >= 4 && c(4)))
/* k := any token for which c(k) holds (a nondeterministic choice among the enabled ones) */
#define PICK(c) if :: c(1) -> k = 1 :: MAXTOK >= 2 && c(2) -> k = 2 :: MAXTOK >= 3 && c(3) -> k = 3 :: MAXTOK >= 4 && c(4) -> k = 4 fi
#define RQ1(k) (rq[k] == 1)
#define LIVE_OF_P(k) LIVE(k, p)
#define STALE(k) (rs[k] == FWD && ph[k] >= P_STALE)
#define CAN_PAY(k) (AMBIGUOUS(k) && booked[k])
#define CAN_NOT_PAY(k) (AMBIGUOUS(k) && (rrej[k] || (ph[k] == P_LATE && (!booked[k] || blate[k]))))
#define CAN_DECIDE(k) (CAN_PAY(k) || CAN_NOT_PAY(k))
#define CONTRADICTED(k) (rs[k] == RNP && booked[k] && !contra[k])
#define UNFLAGGED(k) (rs[k] == RNP && booked[k] && !flag[rp[k]])
#define FWD_ROW(k) (rs[k] == FWD)
/* an ACCEPTED submission whose payout is neither PAID nor with a human (decision 072) */
#define ACC_OPEN(k) (rs[k] == ACC && ps[rp[k]] != PAID && ps[rp[k]] != ATTN)
/* the clock may move intent k to its next phase */
#define PHASE_CAN_ADVANCE(k) (AGING(k) && ph[k] < P_LATE \
  && !(ph[k] == P_OPEN && EARLY_CALL_ENDS_BEFORE_STALE && cearly[k] && rq[k] == 1) \
  && !(ph[k] == P_STALE && EARLY_BOOKING_BEFORE_LATE && cearly[k] && rq[k] == 1))
/* the handler of call k may conclude that its deadline passed */
#define DEADLINE_PASSED(k) (!(RAIL_DECIDES_BEFORE_DEADLINE && cearly[k]) || rq[k] != 1)

/* flags the payout for a human: NEEDS_ATTENTION, with the reason recorded */
inline flag_payout(p) {
  flag[p] = 1;
  ps[p] = ATTN
}

/* Every write that puts a payout in FAILED: it must not have been paid. */
inline set_failed(p) {
#ifndef END_STATE_ONLY
  ok_inv03_failed_payout_never_paid = (paid[p] == 0);
  assert(ok_inv03_failed_payout_never_paid);
#endif
  ps[p] = FAIL
}

/* what a submission means for its payout (submission-outcome.ts); 0 = still forwarding or never [M:verdict]
 * forwarded: defer */
inline verdict(s, w) {
  if
  :: rs[s] == ACC || rs[s] == RPAID -> w = PAID
  :: rs[s] == REJ || rs[s] == RNP -> w = FAIL
  :: AMBIGUOUS(s) -> w = UNK
  :: else -> w = 0
  fi
}

/* the executor's outcome write, fenced by the same token (fence <= token) [M:executor-record] */
inline record_write(p, t, w) {
  if
  :: pf[p] <= t && (PAYABLE(p) || (ps[p] == UNK && w != UNK)) ->
     printf("MODEL executor: payout P%d <- {payout=%d} (token %d)\n", p, w, t);
     if
     :: w == FAIL -> set_failed(p)
     :: else -> ps[p] = w
     fi
  :: else -> skip
  fi
}

/* The statement that records the rail's ACCEPTED closes its payout, by the rule of a PAID [M:proxy-closes]
 * resolution (decision 072): an open payout (PENDING, PROCESSING, UNKNOWN) becomes PAID whatever
 * its fence (the rail paid this payout through this submission: a fact, not a holder's claim), a
 * FAILED one goes to a human. `closed` (the answer's payout_closed) says whether it closed it. */
inline close_accepted(p, closed) {
#ifdef UNCLOSED_ACCEPTED
  closed = 0
#else
  if
  :: PAYABLE(p) || ps[p] == UNK -> ps[p] = PAID; closed = 1; printf("MODEL proxy: payout P%d <- PAID in the same statement\n", p)
  :: ps[p] == FAIL -> flag_payout(p); closed = 0
  :: else -> closed = 0
  fi
#endif
}

/* SubmitPayout leaves the executor for a replica [M:submit] */
inline send(e, p, t) {
  qst[e] = Q_WAIT; qt[e] = t; qon[t] = 1; qe[t] = e; qp[t] = p;
  if
  :: qr[t] = 0
  :: REPLICAS > 1 -> qr[t] = REPLICAS - 1
  fi;
  printf("MODEL executor %d: SubmitPayout(P%d:t%d) to replica r%d\n", e, p, t, qr[t]);
  qep[t] = epoch[qr[t]]; hbusy[qr[t]]++
}

/* a call's bookkeeping once neither the rail nor a handler holds it any more */
inline call_done(k) {
  if :: !callon[k] && rq[k] != 1 -> cearly[k] = 0 :: else -> skip fi
}

/* The mark an item is judged by: the current one, i.e. what the items before it in the same
 * statement left (rail_admit_batch runs rail_admit per item). -DGROUP_MARK_SNAPSHOT, the control: the
 * mark as the statement saw it before its first item (a set-based batch that compares every item
 * with one snapshot). */
#ifdef GROUP_MARK_SNAPSHOT
#define MARK_SEEN gsnap
#else
#define MARK_SEEN mark
#endif

/* Steps 1-3 and the binding for call t: ONE statement's work, one transaction (alone, or one item [M:admission]
 * of a group admission, run in order in the same transaction). Its answer goes to e, p, code, arg. */
inline admit_one(t, e, p, code, arg, k) {
    e = qe[t]; p = qp[t]; qon[t] = 0; qe[t] = 0; qp[t] = 0;
#if defined(MARK_MEMORY) /* [M:mark-memory] */
    if :: t <= mem[qr[t]] -> code = A_FENCED :: else -> skip fi;
#elif !defined(NO_MARK) /* [M:mark] */
    if :: t <= MARK_SEEN -> code = A_FENCED :: else -> skip fi;
#endif
#ifndef NO_BINDING /* [M:binding] */
    if :: code == 0 && !(ps[p] == PROC && pf[p] == t) -> code = A_BIND :: else -> skip fi;
#endif
#ifndef NO_ONE_LIVE /* [M:one-live] */
    if
    :: code == 0 && FOR_TOKENS(LIVE_OF_P) -> code = A_LIVE;
       k = MAXTOK;
       do
       :: LIVE(k, p) -> break
       :: else -> k--
       od;
       arg = k; k = 0
    :: else -> skip
    fi;
#endif
    if :: code == 0 && rs[t] != NONE -> code = A_DUP; arg = t :: else -> skip fi;   /* [M:duplicate] */
    if
    :: code == 0 ->
       printf("MODEL proxy r%d: admits P%d:t%d (last admitted token %d)\n", qr[t], p, t, lastadm);
       ok_inv01_admitted_tokens_increase = (t > lastadm);
       assert(ok_inv01_admitted_tokens_increase);
       lastadm = t;
#ifdef MARK_MEMORY
       mem[qr[t]] = t;
#endif
       if :: t > mark -> mark = t :: else -> skip fi;   /* unfenced variants still advance it when they can */
       rs[t] = FWD; rp[t] = p; ph[t] = P_OPEN
    :: else -> printf("MODEL proxy r%d: refuses P%d:t%d {answer=%d}\n", qr[t], p, t, code)
    fi
}

/* ===================================================================================== */
/* rail-proxy: one SubmitPayout call, on replica r (started by the executor's request)    */
/* ===================================================================================== */
proctype Handler(byte t) {
  byte e, p, code, arg, k;
end_wait:
  (qon[t] || gdone[t]);
  {
    /* Steps 1-3 and the binding: ONE statement, one implicit transaction. (Taking the request
     * off the wire is invisible to everyone else, so it is part of the same step.) Or the
     * request was admitted with others by a group admission: its answer is taken here. */
    atomic {
      if
      :: gdone[t] ->
         e = ga_e[t]; p = ga_p[t]; code = ga_code[t]; arg = ga_arg[t];
         gdone[t] = 0; ga_e[t] = 0; ga_p[t] = 0; ga_code[t] = 0; ga_arg[t] = 0
      :: else ->
#ifdef GROUP_MARK_SNAPSHOT
         gsnap = mark;
#endif
         admit_one(t, e, p, code, arg, k);
         gsnap = 0
      fi
    };
    if
    :: code != 0 -> skip
    :: code == 0 ->
       /* Pre-forward budget: start the rail call only while the intent is young enough that [M:budget] [M:forward]
        * the sweeper cannot declare it ambiguous before the call has ended. */
#if defined(NO_BUDGET)
       atomic { rq[t] = 1; callon[t] = 1; printf("MODEL proxy: calls the rail for P%d:t%d (no budget check; intent {state=%d}, {phase=%d})\n", p, t, rs[t], ph[t]) };  /* whenever the handler gets there */
#elif defined(RESIDUAL_WINDOW)
       if
       :: ph[t] == P_OPEN -> skip;                   /* the check passed ... */
          atomic { rq[t] = 1; callon[t] = 1; printf("MODEL proxy: after a stall past the check, the call for P%d:t%d leaves\n", p, t) }  /* ... the bytes leave after a stall */
       :: code = A_NOTFWD
       fi;
#else
       if
       :: atomic { ph[t] == P_OPEN -> rq[t] = 1; callon[t] = 1; cearly[t] = 1; printf("MODEL proxy: within the budget, calls the rail for P%d:t%d\n", p, t) }
       :: code = A_NOTFWD                            /* the budget is spent (a stall before the check) */
       fi;
#endif
       if
       :: code == A_NOTFWD ->
          /* record NOT_FORWARDED, only if the row is still FORWARDING */
          atomic { if :: rs[t] == FWD -> rs[t] = NOTFWD; ph[t] = 0 :: else -> skip fi; printf("MODEL proxy: budget spent, P%d:t%d NOT_FORWARDED\n", p, t) }
       :: else ->
          /* The answer, or the deadline; then record the outcome (taking the answer is invisible [M:answer] [M:record] [M:late-answer]
           * to everyone else, so it is part of the same step; a stall between the two is the
           * same as a stall before both). An answer for a row that is no longer FORWARDING is
           * a late answer: recorded, counted, paged, the payout flagged; never dropped, never
           * invented. */
          atomic {
            if
            :: rans[t] != 0 -> code = rans[t]
            :: DEADLINE_PASSED(t) -> code = A_AMBIG
            fi;
            rans[t] = 0; callon[t] = 0; call_done(t);
            if
            :: rs[t] == FWD && code == A_ACC -> rs[t] = ACC; ph[t] = 0; printf("MODEL proxy: P%d:t%d ACCEPTED recorded\n", p, t);
               close_accepted(p, arg)
            :: rs[t] == FWD && code == A_REJ -> rs[t] = REJ; ph[t] = 0
#ifdef UNKNOWN_AS_REJECTED
            :: rs[t] == FWD && code == A_UNK -> rs[t] = REJ; ph[t] = 0; code = A_REJ; printf("MODEL proxy: unknown status for P%d:t%d read as REJECTED\n", p, t)
#else
            /* shared/domain/rail-status.ts: neither ACCEPTED nor REJECTED proves nothing: ambiguous [M:unknown-status] */
            :: rs[t] == FWD && code == A_UNK -> rs[t] = TMO; code = A_AMBIG; printf("MODEL proxy: unknown status for P%d:t%d, TIMEOUT\n", p, t)
#endif
            :: rs[t] == FWD && code == A_AMBIG -> rs[t] = TMO; printf("MODEL proxy: no answer by the deadline, P%d:t%d TIMEOUT\n", p, t)
            :: rs[t] != FWD && code != A_AMBIG && code != A_UNK ->
#ifndef NO_LATE_FLAG
               flag_payout(rp[t]);      /* late_answer_* columns written, counted, paged */
               printf("MODEL proxy: late rail answer for P%d:t%d recorded, payout flagged\n", p, t);
#endif
               code = A_LEDGER
            :: rs[t] != FWD && (code == A_AMBIG || code == A_UNK) -> code = A_LEDGER
            fi
          }
       fi
    fi;
    /* the answer to the executor, if it still waits for this call */
    atomic {
      if
      :: qst[e] == Q_WAIT && qt[e] == t -> qans[e] = code; qarg[e] = arg; qst[e] = Q_ANSWERED
      :: else -> skip
      fi;
      hbusy[qr[t]]--; qr[t] = 0; qep[t] = 0;
      code = 0; arg = 0; e = 0; p = 0
    }
  } unless {
    /* the replica crashed (before or after taking the request): this call is gone, its [M:crash]
     * caller gets no answer */
    atomic {
      epoch[qr[t]] != qep[t] ->
      printf("MODEL proxy r%d: crashed with the call for t%d\n", qr[t], t);
      hbusy[qr[t]]--; qr[t] = 0; qep[t] = 0;
      if :: qon[t] -> e = qe[t]; qon[t] = 0; qe[t] = 0; qp[t] = 0 :: else -> skip fi;
      if :: gdone[t] -> e = ga_e[t]; gdone[t] = 0; ga_e[t] = 0; ga_p[t] = 0; ga_code[t] = 0; ga_arg[t] = 0 :: else -> skip fi;
      callon[t] = 0; call_done(t);
      if :: qst[e] == Q_WAIT && qt[e] == t -> qst[e] = Q_DEAD :: else -> skip fi;
      code = 0; arg = 0; e = 0; p = 0
    }
  }
}

/* ===================================================================================== */
/* rail-proxy: group admission (decision 068). Two requests waiting on the same live replica are   */
/* taken off the wire together and admitted by ONE statement, one after the other in one atomic */
/* step, in either order (the order they happened to arrive in); each keeps its own answer. The  */
/* budget then counts from that statement for both (their intents' created_at is the same).      */
/* ===================================================================================== */
#define GROUPABLE(x, y) (MAXTOK >= x && MAXTOK >= y && qon[x] && qon[y] && qr[x] == qr[y] && qep[x] == epoch[qr[x]] && qep[y] == epoch[qr[y]])
inline group_item(t) {
  admit_one(t, e, p, code, arg, k);
  ga_e[t] = e; ga_p[t] = p; ga_code[t] = code; ga_arg[t] = arg; gdone[t] = 1;
  e = 0; p = 0; code = 0; arg = 0
}
inline group_admit(x, y) {
  printf("MODEL proxy r%d: group admission, one statement: t%d then t%d\n", qr[x], x, y);
  gsnap = mark;
  group_item(x);
  group_item(y);
  gsnap = 0;
  groups++
}

active proctype GroupAdmission() {   /* [M:group-admission] */
  byte e, p, code, arg, k;
end_idle:
  do
  :: atomic { groups < GROUPS && GROUPABLE(1, 2) -> group_admit(1, 2) }
  :: atomic { groups < GROUPS && GROUPABLE(1, 2) -> group_admit(2, 1) }
  :: atomic { groups < GROUPS && GROUPABLE(1, 3) -> group_admit(1, 3) }
  :: atomic { groups < GROUPS && GROUPABLE(1, 3) -> group_admit(3, 1) }
  :: atomic { groups < GROUPS && GROUPABLE(2, 3) -> group_admit(2, 3) }
  :: atomic { groups < GROUPS && GROUPABLE(2, 3) -> group_admit(3, 2) }
  od
}

/* ===================================================================================== */
/* executors (UC-05, pay-one.ts after the money-safety changes)                           */
/* ===================================================================================== */
proctype Executor(byte e) {
  byte p, t, prev, s, a, arg, w, nx;
  bit rogue = (e == 1);     /* executor 1 is untrusted (INV-07) [M:least-privilege] */
end_loop:
  do
  /* 1. a payout to work on, and the account lock with its token [M:acquire] */
  :: atomic { lasttok < MAXTOK && (PAYABLE(0) || rogue) -> p = 0; lasttok++; t = lasttok; printf("MODEL executor %d: lock granted, token %d, for payout P%d\n", e, t, p) }; goto fence
  :: atomic { lasttok < MAXTOK && (PAYABLE(1) || rogue) -> p = 1; lasttok++; t = lasttok; printf("MODEL executor %d: lock granted, token %d, for payout P%d\n", e, t, p) }; goto fence
  od;
fence:
  /* 2. fence the payout row (C1 §1.6): fence < token, payable. Sending the request is [M:fence]
   * invisible until a replica takes it, so it is part of the step before it. */
  atomic {
    if
    :: PAYABLE(p) && pf[p] < t -> prev = pf[p]; pf[p] = t; ps[p] = PROC;
       printf("MODEL executor %d: fences P%d with token %d (previous fence %d)\n", e, p, t, prev);
       if
       :: prev == 0 -> send(e, p, t); nx = 1
#ifdef NO_LOOKUP
       :: prev > 0 -> send(e, p, t); nx = 1          /* honest executors skip the lookup too */
#else
       :: prev > 0 -> nx = 2                          /* 3. list the payout's submissions first */
       :: prev > 0 && rogue -> send(e, p, t); nx = 1 /* untrusted: does not look */
#endif
       fi
    :: else ->
       if
       :: nx = 0                                      /* fenced out: stop */
       :: rogue -> send(e, p, t); nx = 1; printf("MODEL executor %d (untrusted): fence refused, submits P%d:t%d anyway\n", e, p, t)  /* untrusted: submits anyway */
       fi
    fi
  };
  if
  :: nx == 0 -> goto done
  :: nx == 1 -> goto wait
  :: nx == 2 -> skip
  fi;
  /* 3. ListPayoutSubmissions: a live submission is settled, never paid again; none: submit [M:lookup] */
  atomic {
    s = MAXTOK;
    do
    :: s > 0 && LIVE(s, p) -> break
    :: s > 0 && !LIVE(s, p) -> s--
    :: s == 0 -> break
    od;
    if
    :: s != 0 -> verdict(s, w); printf("MODEL executor %d: P%d already has live submission t%d, settles it\n", e, p, s)
    :: s == 0 -> printf("MODEL executor %d: P%d has no live submission\n", e, p); send(e, p, t)
    fi
  };
  if
  :: s != 0 && w != 0 -> goto record
  :: s != 0 && w == 0 -> goto done
  :: s == 0 -> skip
  fi;
wait:
  /* 4. the answer to SubmitPayout. Receiving it is invisible to everyone else, so it is part [M:executor-answer] [M:lost-answer]
   * of the step that acts on it. */
  atomic {
    if
    :: qst[e] == Q_ANSWERED -> a = qans[e]; arg = qarg[e]
    :: qst[e] == Q_DEAD -> a = A_LOST
    :: qst[e] == Q_WAIT && xlost < XLOST -> xlost++; a = A_LOST   /* network, call timeout */
    fi;
    qst[e] = Q_IDLE; qt[e] = 0; qans[e] = 0; qarg[e] = 0;
    printf("MODEL executor %d: answer for P%d:t%d: {answer=%d}\n", e, p, t, a);
    if
    /* decision 072 [M:executor-closed]: the proxy closed the payout with the answer; nothing to write */
    :: a == A_ACC && arg == 1 -> skip
#ifdef UNCLOSED_ACCEPTED
    :: a == A_ACC && arg == 0 -> skip
#else
    :: a == A_ACC && arg == 0 -> w = PAID; record_write(p, t, w); w = 0
#endif
    :: a == A_REJ -> w = FAIL; record_write(p, t, w); w = 0
    :: a == A_AMBIG -> w = UNK; record_write(p, t, w); w = 0
    :: a == A_FENCED || a == A_BIND || a == A_NOTFWD -> skip       /* defer */
    :: a == A_LIVE || a == A_DUP ->
       /* rail_duplicate_attempted_total must stay zero: an honest executor never trips it */
       ok_no_duplicate_alarm_for_honest_executor = rogue;
       assert(ok_no_duplicate_alarm_for_honest_executor);
       s = arg; verdict(s, w)
    :: a == A_LEDGER -> s = t; verdict(s, w)
    :: a == A_LOST ->
       /* C3 §3.8: after a lost answer, read the ledger (the payout's submissions); never
        * resubmit blindly. Not there: the intent never committed, defer. */
       if :: rs[t] != NONE && rp[t] == p -> s = t; verdict(s, w) :: else -> skip fi
    fi
  };
  if
  :: w != 0 -> skip
  :: else -> goto done
  fi;
record:
  atomic { record_write(p, t, w) };
done:
  atomic { p = 0; t = 0; prev = 0; s = 0; a = 0; arg = 0; w = 0; nx = 0 };
  goto end_loop
}

/* ===================================================================================== */
/* the rail: books on receipt (money moves), may lose its answer, may never receive a call [M:rail-book] */
/* ===================================================================================== */
inline book(k) {
  printf("MODEL rail: books P%d:t%d, money moves (intent {state=%d})\n", rp[k], k, rs[k]);
  booked[k] = 1;
  blate[k] = (!AGING(k) || ph[k] == P_LATE);
  ok_no_rail_payment_without_intent = (rs[k] != NONE);
  assert(ok_no_rail_payment_without_intent);
#ifndef END_STATE_ONLY
  ok_no_payment_after_not_paid = (rs[k] != RNP);
  assert(ok_no_payment_after_not_paid);
#endif
#ifndef END_STATE_ONLY
  ok_inv03_failed_payout_never_paid = (ps[rp[k]] != FAIL);
  assert(ok_inv03_failed_payout_never_paid);
#endif
  paid[rp[k]]++;
  ok_inv02_no_payout_paid_twice = (paid[rp[k]] <= 1);
  assert(ok_inv02_no_payout_paid_twice)
}

active proctype Rail() {
  byte k;
end_rail:
  do
  :: atomic {
       FOR_TOKENS(RQ1) ->
       PICK(RQ1);
       if
       :: book(k); if :: callon[k] -> rans[k] = A_ACC :: else -> skip fi
       :: lost < RAIL_LOSE -> lost++; book(k); printf("MODEL rail: ... and its answer is lost\n")  /* booked, answer lost */
       :: rrej[k] = 1; if :: callon[k] -> rans[k] = A_REJ :: else -> skip fi; printf("MODEL rail: rejects P%d:t%d\n", rp[k], k)
       :: dropped < RAIL_DROP -> dropped++; printf("MODEL rail: the call for t%d never lands\n", k)  /* never lands */
       :: unknown < RAIL_UNKNOWN -> unknown++; book(k); if :: callon[k] -> rans[k] = A_UNK :: else -> skip fi;
          printf("MODEL rail: ... and answers with a status the protocol does not document\n")
       fi;
       rq[k] = 2;
       call_done(k);
       k = 0
     }
  od
}

/* ===================================================================================== */
/* the sweeper (every replica runs one; they all do the same UPDATE) [M:sweep] */
/* ===================================================================================== */
active proctype Sweeper() {
  byte k;
#ifndef NO_SWEEPER
end_sweep:
  do
  :: atomic {
       FOR_TOKENS(STALE) ->
       k = 1;
       do
       :: k <= MAXTOK -> if :: STALE(k) -> rs[k] = TMO; printf("MODEL sweeper: t%d FORWARDING past deadline + margin -> TIMEOUT\n", k) :: else -> skip fi; k++
       :: k > MAXTOK -> break
       od;
       k = 0
     }
  od
#endif
}

/* ===================================================================================== */
/* the reconciler (UC-07): statement lag, settlement window, and the NOT_PAID watch       */
/* ===================================================================================== */
active proctype Reconciler() {
  byte k, v;
#ifndef NO_RECONCILER
end_rec:
  do
  :: atomic {
       FOR_TOKENS(CAN_DECIDE) ->
       PICK(CAN_DECIDE);
       /* a payment booked when the intent was P_LATE may be missing from a statement that [M:reconcile-decide] [M:resolve]
        * covers created_at + WINDOW (statement lag): then both verdicts are possible */
       if
       :: CAN_PAY(k) -> v = RPAID
       :: CAN_NOT_PAY(k) -> v = RNP;
#ifndef END_STATE_ONLY
          ok_no_payment_after_not_paid = !booked[k];
          assert(ok_no_payment_after_not_paid)
#endif
       fi;
       rs[k] = v; ph[k] = P_LATE;
       printf("MODEL reconciler: t%d of P%d resolved {state=%d}\n", k, rp[k], v);
       /* and the payout row, in the same statement (decision 066) [M:payout-after-resolve]:
        * PAID closes an open payout and flags a FAILED one; NOT_PAID fails the payout waiting on
        * this attempt, and an UNKNOWN one whatever its fence (it cannot be fenced again) */
       if
       :: v == RPAID && (PAYABLE(rp[k]) || ps[rp[k]] == UNK) -> ps[rp[k]] = PAID
       :: v == RPAID && ps[rp[k]] == FAIL -> flag_payout(rp[k])
       :: v == RNP && ((PAYABLE(rp[k]) && pf[rp[k]] == k) || ps[rp[k]] == UNK) -> set_failed(rp[k])
       :: else -> skip
       fi;
       k = 0; v = 0
     }
#ifndef NO_NOT_PAID_WATCH
  :: atomic {
       /* every NOT_PAID verdict is re-checked against the statement for the watch period [M:not-paid-watch]
        * (longer than any run of this model) */
       FOR_TOKENS(CONTRADICTED) ->
       PICK(CONTRADICTED);
       contra[k] = 1; flag_payout(rp[k]);
       printf("MODEL reconciler: the statement contradicts NOT_PAID for t%d, payout P%d flagged\n", k, rp[k]);
       k = 0
     }
#endif
  od
#endif
}

/* ===================================================================================== */
/* the model clock: every timer moves forward on its own, within the configured relations [M:clock] */
/* ===================================================================================== */
active proctype Clock() {
  byte k;
end_clock:
  do
  :: atomic { FOR_TOKENS(PHASE_CAN_ADVANCE) -> PICK(PHASE_CAN_ADVANCE); ph[k]++; printf("MODEL clock: intent t%d is now {phase=%d}\n", k, ph[k]); k = 0 }
  od
}

/* ===================================================================================== */
/* replica crashes: a crashed replica restarts at once, empty                             */
/* ===================================================================================== */
active proctype Chaos() {
end_chaos:
  do
  :: atomic { crashes < CRASHES && (hbusy[0] > 0 || mem[0] > 0) -> crashes++; epoch[0]++; mem[0] = 0; printf("MODEL replica r0 crashes and restarts (in-process state lost)\n") }
  :: atomic { REPLICAS > 1 && crashes < CRASHES && (hbusy[REPLICAS - 1] > 0 || mem[REPLICAS - 1] > 0) -> crashes++; epoch[REPLICAS - 1]++; mem[REPLICAS - 1] = 0; printf("MODEL replica r%d crashes and restarts (in-process state lost)\n", REPLICAS - 1) }
  od
}

/* ===================================================================================== */
/* properties checked when nothing can move any more                                      */
/* ===================================================================================== */
active proctype Quiescence() {
  timeout ->
  atomic {
    ok_payment_after_not_paid_is_flagged = !FOR_TOKENS(UNFLAGGED);
    assert(ok_payment_after_not_paid_is_flagged);
    /* what the rail accepted is PAID on its payout, or with a human (decision 072) */
    ok_accepted_payout_closed = !FOR_TOKENS(ACC_OPEN);
    assert(ok_accepted_payout_closed);
#ifndef LIVENESS
    /* the safety shadow of the liveness property; the LTL formula below is the real check */
    ok_no_intent_left_forwarding = !FOR_TOKENS(FWD_ROW);
    assert(ok_no_intent_left_forwarding)
#else
    skip
#endif
  }
}

init {
  atomic {
    run Executor(0); run Executor(1);
    run Handler(1);
    if :: MAXTOK >= 2 -> run Handler(2) :: else -> skip fi;
    if :: MAXTOK >= 3 -> run Handler(3) :: else -> skip fi;
    if :: MAXTOK >= 4 -> run Handler(4) :: else -> skip fi
  }
}

#ifdef LIVENESS
/* every intent eventually leaves FORWARDING (pan -a -f: weak fairness) */
ltl leaves_forwarding {
  [] ((rs[1] == FWD -> <> (rs[1] != FWD)) && (rs[2] == FWD -> <> (rs[2] != FWD)) && (rs[3] == FWD -> <> (rs[3] != FWD)))
}
#endif
