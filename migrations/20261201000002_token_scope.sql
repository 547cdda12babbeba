-- API tokens carry what they may do and which workflows they may touch (issue 16).
-- role: viewer reads status only; operator and approver also start workflows. Tokens created
-- before this migration started and read everything: they become operator tokens.
-- creation_key_prefix: when set, the token starts and reads only workflows whose creation key
-- begins with it; the others do not exist for it.
alter table api_token
    add column role role not null default 'operator',
    add column creation_key_prefix text check (creation_key_prefix <> '');

-- New tokens name their role.
alter table api_token alter column role drop default;

-- `z29c token revoke NAME` names one live token.
create index api_token_live_name_idx on api_token (name) where revoked_at is null;
