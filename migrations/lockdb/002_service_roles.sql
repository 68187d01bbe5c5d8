-- Least privilege: the lock service logs in with a role of its own (see paydb's
-- 008_service_roles.sql). It grants leases and raises the token floor; it never deletes a lease
-- row (the per-key token counter lives in it) and never lowers the floor.
DO $$
BEGIN
  CREATE ROLE railfence_lock NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
  NULL; -- roles are per server: another database on it created it already
END $$;

REVOKE ALL ON locks, lock_token_floor, schema_migrations FROM PUBLIC;
GRANT SELECT ON schema_migrations TO railfence_lock;
GRANT SELECT, INSERT ON locks TO railfence_lock;
GRANT UPDATE (token, lease_hash, owner, granted_at, expires_at, released_at) ON locks TO railfence_lock;
GRANT SELECT ON lock_token_floor TO railfence_lock;
GRANT UPDATE (floor, updated_at) ON lock_token_floor TO railfence_lock;
