-- A bulk run started by an API token: its items are audited as the API's (actor kind `api`),
-- under the token's name, as the token's own actions are.
alter table bulk_run add column by_token boolean not null default false;
