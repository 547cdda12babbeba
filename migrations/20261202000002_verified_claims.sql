-- Each claim the contract suite proved for the verified version, as the step page lists them:
-- `[{"claim": "...", "passed": true}, …]`.
alter table adapter add column verified_claims jsonb;
