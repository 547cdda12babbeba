-- Operators' notes (docs/DESIGN.md §20) are audit entries (`action = 'note'`, the text as the
-- reason): append-only, attributed, never changing state. Found by workflow — the workflow
-- page, the incident page and the review queue's "has a note" filter — through this small
-- partial index, whatever the audit log's size.
create index audit_note_idx on audit (workflow_id, at) where action = 'note';
