-- The status projection's row already holds the revision it reflects; it becomes the status
-- consumer's applied revision, and the notification consumer needs none (a candidate is
-- recorded at the workflow's current revision unless one at that revision or later exists).
-- `consumer_revision` wrote a row per workflow and batch for each of the two (docs/DESIGN.md §10).
update status_projection p set revision = c.revision
from consumer_revision c
where c.consumer = 'status' and c.workflow_id = p.workflow_id and c.revision > p.revision;

drop table consumer_revision;
