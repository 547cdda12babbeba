-- The workflow-state rule, written once (docs/DESIGN.md §10). Every writer of `workflow.state`
-- reads it from here: admission (`workflow::insert_unless_exists`, from what admission knows),
-- `workflow::refresh_state` and a flush's `conclusion::announce`, and the pgbench prototype.

-- The state facts make: cancelled before review, review before completion, completion before
-- running. A plain expression, so the planner inlines it where it is called.
create function workflow_state_from(cancelled boolean, needs_review boolean, all_done boolean,
                                    started boolean)
returns workflow_state language sql immutable parallel safe as $$
    select case when cancelled then 'cancelled'
                when needs_review then 'needs_review'
                when all_done then 'completed'
                when started then 'running'
                else 'pending' end::workflow_state
$$;

-- The state a workflow's current steps (those not replaced) and its open incidents make. One
-- row; a set-returning SQL function, so the planner inlines it into the calling statement.
create function workflow_state_of(workflow uuid) returns table (state workflow_state)
language sql stable parallel safe as $$
    select workflow_state_from(
               coalesce(bool_or(s.state = 'cancelled'), false),
               coalesce(bool_or(s.state in ('review_required', 'unsent', 'rejected')), false)
                   or exists (select 1 from integrity_incident i join step t on t.id = i.step_id
                              where t.workflow_id = workflow and i.resolved_at is null),
               coalesce(bool_and(s.state in ('succeeded', 'waived')), false),
               coalesce(bool_or(s.state not in ('ready', 'held', 'blocked')), false))
    from step s
    where s.workflow_id = workflow
      and not exists (select 1 from step r where r.replaces_step_id = s.id)
$$;
