-- A step's version is a counter every change bumps (docs/DESIGN.md §7): the console's forms
-- and the API's `If-Match` compare it. It was the time of the last change, which two changes
-- could share and a transaction started earlier could set back.
alter table step add column version bigint not null default 1;

create function step_versioned() returns trigger language plpgsql as $$
begin
    new.version := old.version + 1;
    return new;
end
$$;

create trigger step_versioned before update on step
    for each row execute function step_versioned();
