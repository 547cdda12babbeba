-- A digest is `sha256:` and 64 lowercase hex digits. PostgreSQL evaluates every check
-- constraint of a row on each version written, whatever changed, and the anchored regular
-- expression took about 10 µs each time: about three times per external step (the workflow's
-- new versions and the request identity). The same rule as a length, a prefix and a negated
-- character class takes about 1 µs (docs/DESIGN.md §4). One function spells it for every
-- table that keeps a digest; being a single SQL expression, it is inlined into each check.
create function is_sha256_digest(d text) returns boolean
    language sql immutable parallel safe
    return length(d) = 71 and left(d, 7) = 'sha256:' and substr(d, 8) !~ '[^0-9a-f]';

alter table workflow
    drop constraint workflow_input_digest_check,
    add constraint workflow_input_digest_check check (is_sha256_digest(input_digest));

alter table step
    drop constraint step_input_digest_check,
    add constraint step_input_digest_check check (input_digest is null or is_sha256_digest(input_digest));

alter table external_request
    drop constraint external_request_input_digest_check,
    add constraint external_request_input_digest_check check (is_sha256_digest(input_digest));

alter table definition
    drop constraint definition_digest_check,
    add constraint definition_digest_check check (is_sha256_digest(digest));
