-- A digest is `sha256:` and 64 lowercase hex digits. PostgreSQL evaluates every check
-- constraint of a row on each version written, whatever changed, and the anchored regular
-- expression took about 10 µs each time: about three times per external step (the workflow's
-- new versions and the request identity). The same rule as a length, a prefix and a negated
-- character class takes about 1 µs (docs/DESIGN.md §4).
alter table workflow
    drop constraint workflow_input_digest_check,
    add constraint workflow_input_digest_check check (
        length(input_digest) = 71 and left(input_digest, 7) = 'sha256:'
        and substr(input_digest, 8) !~ '[^0-9a-f]');

alter table step
    drop constraint step_input_digest_check,
    add constraint step_input_digest_check check (
        input_digest is null
        or (length(input_digest) = 71 and left(input_digest, 7) = 'sha256:'
            and substr(input_digest, 8) !~ '[^0-9a-f]'));

alter table external_request
    drop constraint external_request_input_digest_check,
    add constraint external_request_input_digest_check check (
        length(input_digest) = 71 and left(input_digest, 7) = 'sha256:'
        and substr(input_digest, 8) !~ '[^0-9a-f]');
