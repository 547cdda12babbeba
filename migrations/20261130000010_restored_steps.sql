-- Set by `z29c check --before-resume` on an external step the restored backup saw waiting for
-- its dependencies: the live system may have sent it after the backup was taken, so when its
-- dependencies are met it starts as outcome unknown (asked about, or reviewed) instead of ready.
alter table step add column restored_at timestamptz;
