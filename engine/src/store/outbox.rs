//! The outbox's delivery side (docs/DESIGN.md §10): reading final events in position order and
//! the readers' cursors (the publisher's and each consumer's), and the revisions per workflow
//! that the projections have applied. Appending an event is [`super::journal`]'s: it belongs to
//! the transaction of the change it announces.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

/// Where an event stands in the outbox: the transaction that wrote it, then its row. Events
/// are read in this order, and a reader's cursor is the position of the last one it took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub txid: i64,
    pub id: i64,
}

/// One outbox event as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub position: Position,
    pub event_id: Uuid,
    pub workflow_id: Option<Uuid>,
    pub revision: Option<i64>,
    pub kind: String,
    pub payload: Value,
}

/// The reader name of the publisher's cursor: every consumer took everything up to it.
pub const PUBLISHER: &str = "publisher";

/// Where the publisher stands, up to `batch` final events past it in position order, and
/// whether events past those exist that are not final yet (written by a transaction that is
/// still running, or newer than one that is): they are left for a later read, which will find
/// them in order. One statement, read without a transaction held open.
pub async fn unpublished(
    conn: &mut PgConnection,
    batch: i64,
) -> sqlx::Result<(Position, Vec<EventRow>, bool)> {
    let rows = sqlx::query!(
        r#"with published as (
               select coalesce(max(txid), 0) as txid, coalesce(max(id), 0) as id
               from outbox_cursor where reader = 'publisher')
           select p.txid as "after_txid!", p.id as "after_id!",
                  o.txid as "txid?", o.id as "id?", o.event_id as "event_id?",
                  o.workflow_id, o.revision, o.kind as "kind?", o.payload as "payload?",
                  pg_snapshot_xmin(pg_current_snapshot())::text::bigint as "horizon!"
           from published p
           left join lateral (select * from outbox
                              where (outbox.txid, outbox.id) > (p.txid, p.id)
                              order by outbox.txid, outbox.id limit $1) o on true"#,
        batch
    )
    .fetch_all(conn)
    .await?;
    let published = rows.first().map_or_else(Position::default, |r| Position {
        txid: r.after_txid,
        id: r.after_id,
    });
    let mut events = Vec::with_capacity(rows.len());
    let mut held_back = false;
    for r in rows {
        let (Some(txid), Some(id), Some(event_id), Some(kind), Some(payload)) =
            (r.txid, r.id, r.event_id, r.kind, r.payload)
        else {
            continue;
        };
        if txid >= r.horizon {
            held_back = true;
            break;
        }
        events.push(EventRow {
            position: Position { txid, id },
            event_id,
            workflow_id: r.workflow_id,
            revision: r.revision,
            kind,
            payload,
        });
    }
    Ok((published, events, held_back))
}

/// Up to `batch` events after `after` and up to `until`, in position order: history a reader
/// already took, for replaying it.
pub async fn history(
    conn: &mut PgConnection,
    after: Position,
    until: Position,
    batch: i64,
) -> sqlx::Result<Vec<EventRow>> {
    let rows = sqlx::query!(
        r#"select txid, id, event_id, workflow_id, revision, kind, payload from outbox
           where (txid, id) > ($1, $2) and (txid, id) <= ($3, $4) order by txid, id limit $5"#,
        after.txid,
        after.id,
        until.txid,
        until.id,
        batch
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| EventRow {
            position: Position {
                txid: r.txid,
                id: r.id,
            },
            event_id: r.event_id,
            workflow_id: r.workflow_id,
            revision: r.revision,
            kind: r.kind,
            payload: r.payload,
        })
        .collect())
}

/// Where `reader` stands; a reader that never took anything stands at the start.
pub async fn cursor(conn: &mut PgConnection, reader: &str) -> sqlx::Result<Position> {
    let row = sqlx::query!(
        r#"select txid, id from outbox_cursor where reader = $1"#,
        reader
    )
    .fetch_optional(conn)
    .await?;
    Ok(row
        .map(|r| Position {
            txid: r.txid,
            id: r.id,
        })
        .unwrap_or_default())
}

/// Where `reader` stands, locked until `conn`'s transaction ends (two deliveries to one
/// consumer then take their events one after the other). A reader seen for the first time
/// starts at `start`.
pub async fn lock_cursor(
    conn: &mut PgConnection,
    reader: &str,
    start: Position,
) -> sqlx::Result<Position> {
    let row = sqlx::query!(
        r#"insert into outbox_cursor (reader, txid, id) values ($1, $2, $3)
           on conflict (reader) do update set txid = outbox_cursor.txid
           returning txid, id"#,
        reader,
        start.txid,
        start.id
    )
    .fetch_one(conn)
    .await?;
    Ok(Position {
        txid: row.txid,
        id: row.id,
    })
}

/// Moves `reader`'s cursor from exactly `from` to `to`, locking it until `conn`'s transaction
/// ends; false (and nothing changed) when it stood anywhere else or nowhere yet.
pub async fn move_cursor_from(
    conn: &mut PgConnection,
    reader: &str,
    from: Position,
    to: Position,
) -> sqlx::Result<bool> {
    let moved = sqlx::query!(
        r#"update outbox_cursor set txid = $4, id = $5
           where reader = $1 and txid = $2 and id = $3"#,
        reader,
        from.txid,
        from.id,
        to.txid,
        to.id
    )
    .execute(conn)
    .await?
    .rows_affected();
    Ok(moved == 1)
}

/// Moves `reader`'s cursor to `to`; never backwards.
pub async fn advance_cursor(
    conn: &mut PgConnection,
    reader: &str,
    to: Position,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into outbox_cursor (reader, txid, id) values ($1, $2, $3)
           on conflict (reader) do update set txid = excluded.txid, id = excluded.id
           where (outbox_cursor.txid, outbox_cursor.id) < (excluded.txid, excluded.id)"#,
        reader,
        to.txid,
        to.id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Re-bases every stored position when some of them are not below this cluster's transaction
/// ids (a `pg_dump` restored into another cluster whose counter is behind the one that wrote
/// it): new events would sort before the restored cursors and never be read. Each event's
/// txid becomes 2 plus the number of distinct cursor positions before it, and each cursor the
/// last event of its own segment, so every reader has taken exactly the events it had taken and
/// every later transaction id sorts after them all. Within a segment events keep id order (the
/// consumers sort a workflow's revisions within a batch, docs/DESIGN.md §10). Returns how many
/// events moved: none when the positions are already below the counter. Run with every reader
/// stopped; it holds the outbox's append-only trigger off for its own transaction only.
pub async fn rebase_positions(conn: &mut PgConnection) -> sqlx::Result<u64> {
    let ahead = sqlx::query_scalar!(
        r#"select coalesce(greatest((select max(txid) from outbox),
                                    (select max(txid) from outbox_cursor))
                           >= pg_current_xact_id()::text::bigint, false) as "ahead!""#
    )
    .fetch_one(&mut *conn)
    .await?;
    if !ahead {
        return Ok(0);
    }
    sqlx::query!("alter table outbox disable trigger outbox_is_append_only")
        .execute(&mut *conn)
        .await?;
    // Both updates read the positions as they were before either (one statement, one snapshot;
    // the cursors' update runs whether or not the result reads it).
    let moved = sqlx::query_scalar!(
        r#"with cuts as (select distinct txid, id from outbox_cursor),
           events as (
               update outbox o
               set txid = 2 + (select count(*) from cuts c where (c.txid, c.id) < (o.txid, o.id))
               returning 1
           ),
           cursors as (
               update outbox_cursor k
               set txid = 2 + (select count(*) from cuts c where (c.txid, c.id) < (k.txid, k.id)),
                   id = coalesce((
                       select max(o.id) from outbox o
                       where (o.txid, o.id) <= (k.txid, k.id)
                         and not exists (select 1 from cuts c
                                         where (c.txid, c.id) >= (o.txid, o.id)
                                           and (c.txid, c.id) < (k.txid, k.id))), 0)
           )
           select count(*) as "events!" from events"#
    )
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query!("alter table outbox enable trigger outbox_is_append_only")
        .execute(&mut *conn)
        .await?;
    Ok(u64::try_from(moved).unwrap_or(0))
}

/// How many events the publisher has not handed to every consumer yet.
pub async fn backlog(conn: &mut PgConnection) -> sqlx::Result<i64> {
    let published = cursor(&mut *conn, PUBLISHER).await?;
    sqlx::query_scalar!(
        r#"select count(*) as "n!" from outbox where (txid, id) > ($1, $2)"#,
        published.txid,
        published.id
    )
    .fetch_one(conn)
    .await
}

/// The advisory lock only the publisher that delivers now holds (one at a time, across every
/// process): a second publisher waits for its turn instead of delivering the same batch.
const PUBLISHER_LOCK: i64 = 0x7a32_3963_0001;

/// Takes the publisher's lock on `conn` if no other session holds it.
pub async fn try_lock_publisher(conn: &mut PgConnection) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"select pg_try_advisory_lock($1) as "locked!""#,
        PUBLISHER_LOCK
    )
    .fetch_one(conn)
    .await
}

/// Releases the publisher's lock held on `conn`.
pub async fn unlock_publisher(conn: &mut PgConnection) -> sqlx::Result<()> {
    sqlx::query_scalar!(
        r#"select pg_advisory_unlock($1) as "unlocked!""#,
        PUBLISHER_LOCK
    )
    .fetch_one(conn)
    .await?;
    Ok(())
}
