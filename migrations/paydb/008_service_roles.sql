-- Least privilege (SPEC C3 §3.9): one owner role runs migrations (it owns every table, and only an
-- owner can ALTER, DROP or disable triggers); each service logs in with a role of its own,
-- granted only the statements that service runs. These are group roles (NOLOGIN): a deployment
-- creates one login role per component IN ROLE the group (docs/deploy.md), and the harness lets
-- the group roles log in on its throwaway servers. Nothing here may DELETE or TRUNCATE a money
-- record; the one DELETE granted is on idempotency_keys (stored answers expire, errors are not
-- pinned: RESILIENCE.md's contract).
DO $$
DECLARE r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['railfence_rail_proxy', 'railfence_executor', 'railfence_payouts', 'railfence_reconciler', 'railfence_auditor'] LOOP
    BEGIN
      EXECUTE format('CREATE ROLE %I NOLOGIN', r);
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL; -- roles are per server: another database on it created it already
    END;
  END LOOP;
END $$;

REVOKE ALL ON payouts, idempotency_keys, rail_high_water, rail_high_water_log, rail_submissions, schema_migrations FROM PUBLIC;

-- Every service checks at start that the schema it needs is there (shared/db/migrate.ts).
GRANT SELECT ON schema_migrations TO railfence_rail_proxy, railfence_executor, railfence_payouts, railfence_reconciler, railfence_auditor;

-- rail-proxy: advances marks and records intents and outcomes; reads payouts to bind a
-- submission to its payout, and flags a payout when the rail contradicts its recorded outcome.
GRANT SELECT, INSERT ON rail_high_water TO railfence_rail_proxy;
GRANT UPDATE (mark, updated_at) ON rail_high_water TO railfence_rail_proxy;
GRANT SELECT, INSERT ON rail_submissions TO railfence_rail_proxy;
GRANT UPDATE (state, rail_reference, rail_reason, ambiguity_cause, updated_at, answered_at, forward_delay_ms,
              previous_state, resolution_outcome, resolution_actor, resolution_note, resolved_at,
              late_answer_state, late_rail_reference, late_rail_reason, late_answered_at,
              contradicted_at, contradicting_rail_reference, contradiction_actor)
  ON rail_submissions TO railfence_rail_proxy;
GRANT SELECT ON payouts TO railfence_rail_proxy;
GRANT UPDATE (state, attention_reason, attention_detail, attention_at, updated_at) ON payouts TO railfence_rail_proxy;

-- executor (untrusted, INV-07): claims, fences and closes payouts; nothing of the proxy's.
GRANT SELECT ON payouts TO railfence_executor;
GRANT UPDATE (fence, state, claimed_by, claimed_until, submission_ref, rail_reference, failure_reason,
              attention_reason, attention_detail, attention_at, updated_at)
  ON payouts TO railfence_executor;

-- payouts API: creates and reads payouts; keeps Idempotency-Key answers.
GRANT SELECT, INSERT ON payouts TO railfence_payouts;
GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency_keys TO railfence_payouts;

-- reconciler: closes payouts from resolved submissions (the ledger itself only through rail-proxy).
GRANT SELECT ON payouts TO railfence_reconciler;
GRANT UPDATE (state, rail_reference, failure_reason, claimed_by, claimed_until,
              attention_reason, attention_detail, attention_at, updated_at)
  ON payouts TO railfence_reconciler;

-- auditor (`railfence check`): reads the ledger, the marks and the payouts; writes nothing (it
-- joins the rail's statement in temporary tables, which PUBLIC may create by default).
GRANT SELECT ON payouts, rail_submissions, rail_high_water, rail_high_water_log TO railfence_auditor;
