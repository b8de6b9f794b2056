import PostgresNIO

/// The schema's versions, oldest first. A version, once released, is never edited: changes go in a new
/// one. Each statement runs on its own (the extended protocol allows one statement per query).
enum Schema {
    struct Migration: Sendable {
        let version: Int
        let name: String
        let statements: [PostgresQuery]
    }

    /// Key of the transaction-scoped advisory lock that serializes concurrent migrations.
    static let migrationLockKey: Int64 = 0x5055_5348_4D49_4752  // "PUSHMIGR"

    static var migrations: [Migration] { [version1, version2, version3, version4, version5, version6, version7, version8, version9, version10, version11, version12, version13, version14, version15, version16, version17, version18] }

    private static var version18: Migration {
        Migration(version: 18, name: "leadership epochs", statements: [
            // Each leadership of a lock is numbered (``CampaignStore/withLeadership(named:_:)``): the
            // leader's writes check that theirs is still the latest (``LeadershipFence``).
            "CREATE TABLE leadership_epochs (lock_name text PRIMARY KEY, epoch bigint NOT NULL)"
        ])
    }

    private static var version17: Migration {
        Migration(version: 17, name: "rejections in batches", statements: [
            // A fold's rejections, up to 10,000, as one row of parallel arrays: a row per rejection,
            // with its two index entries, cost Postgres 1.9 µs a rejection; a batch row 0.15
            // (psql, 10,000-rejection statements; docs/benchmarks.md, 2026-11-29). Stored
            // uncompressed, as the shard tokens are: compressing cost 0.78 µs a rejection to save
            // 29 of 69 bytes. `batch` orders the batches as they were written, for "first verdict".
            """
            CREATE TABLE token_failure_batches (
                batch           bigint GENERATED ALWAYS AS IDENTITY,
                campaign_id     uuid NOT NULL,
                observed_at     timestamptz NOT NULL DEFAULT now(),
                tokens          bytea[] NOT NULL,
                reasons         text[] NOT NULL,
                shards          integer[] NOT NULL,
                apns_timestamps bigint[] NOT NULL
            )
            """,
            """
            ALTER TABLE token_failure_batches
                ALTER COLUMN tokens SET STORAGE EXTERNAL, ALTER COLUMN reasons SET STORAGE EXTERNAL,
                ALTER COLUMN shards SET STORAGE EXTERNAL, ALTER COLUMN apns_timestamps SET STORAGE EXTERNAL
            """,
            // The rows recorded so far, one batch per campaign and transaction start (a fold's; it
            // may hold more than 10,000), in the order written.
            """
            INSERT INTO token_failure_batches (campaign_id, observed_at, tokens, reasons, shards, apns_timestamps)
            SELECT campaign_id, observed_at, array_agg(token ORDER BY ctid), array_agg(reason ORDER BY ctid),
                   array_agg(shard ORDER BY ctid), array_agg(COALESCE(apns_timestamp, -1) ORDER BY ctid)
            FROM token_failures GROUP BY campaign_id, observed_at ORDER BY observed_at, campaign_id
            """,
            "DROP TABLE token_failures",
            "CREATE INDEX token_failure_batches_campaign ON token_failure_batches (campaign_id)",
            "CREATE INDEX token_failure_batches_observed ON token_failure_batches (observed_at)",
            // One row per rejection, as the table was: for readers, and for operators' own queries.
            // A missing APNs timestamp is stored as -1 (bind arrays carry no NULLs) and read as NULL.
            """
            CREATE VIEW token_failures AS
            SELECT b.campaign_id, u.token, u.reason, u.shard, b.observed_at, NULLIF(u.apns_timestamp, -1) AS apns_timestamp,
                   b.batch, u.position
            FROM token_failure_batches b,
                 unnest(b.tokens, b.reasons, b.shards, b.apns_timestamps) WITH ORDINALITY AS u(token, reason, shard, apns_timestamp, position)
            """,
        ])
    }

    private static var version16: Migration {
        Migration(version: 16, name: "rejections appended", statements: [
            // A rejection's row is appended, without the (campaign, token) key: the key and the
            // speculative insert (ON CONFLICT) it needed made a row cost 4.3–4.8 µs against 1.7
            // without (psql, 10,000-row statements; docs/benchmarks.md, 2026-11-29). A token's
            // outcome is counted once upstream (Redis, then the event stream applied at most once),
            // so a second row for a token can only come from a re-materialized queue; readers take
            // one row per token.
            "ALTER TABLE token_failures DROP CONSTRAINT token_failures_pkey",
            "CREATE INDEX token_failures_campaign ON token_failures (campaign_id)",
        ])
    }

    private static var version15: Migration {
        Migration(version: 15, name: "personalized audiences", statements: [
            // A personalized campaign's shard stores each recipient's packed template values
            // beside its token (PayloadTemplate.pack), so that a lost queue is rebuilt with them.
            "ALTER TABLE campaign_shard_tokens ADD COLUMN recipient_values bytea",
            // As for the tokens: values compress poorly, and compressing them cost a launch more
            // CPU than storing them.
            "ALTER TABLE campaign_shard_tokens ALTER COLUMN recipient_values SET STORAGE EXTERNAL",
            "ALTER TABLE campaigns ADD COLUMN personalized boolean NOT NULL DEFAULT false",
        ])
    }

    private static var version14: Migration {
        Migration(version: 14, name: "device locales and time zones", statements: [
            // What a launch in parts reads of a registry audience (`--localized`, `--local-time`):
            // the locale and IANA time zone the app registered the device with.
            "ALTER TABLE device_tokens ADD COLUMN locale text, ADD COLUMN time_zone text",
        ])
    }

    private static var version13: Migration {
        Migration(version: 13, name: "split tests", statements: [
            // A split test (`launch --variant`) is one campaign per variant, each with its share
            // of the audience and its own payload, under the split test's id.
            "ALTER TABLE campaigns ADD COLUMN parent_id uuid",
            "ALTER TABLE campaigns ADD COLUMN variant text",
            "CREATE INDEX campaigns_parent ON campaigns (parent_id) WHERE parent_id IS NOT NULL",
        ])
    }

    private static var version12: Migration {
        Migration(version: 12, name: "scheduled campaigns", statements: [
            // A campaign launched with `--at` waits in state `scheduled` until then; the
            // coordinator starts it. NULL starts at once.
            "ALTER TABLE campaigns ADD COLUMN starts_at timestamptz",
            "ALTER TABLE campaigns DROP CONSTRAINT campaigns_state_check",
            """
            ALTER TABLE campaigns ADD CONSTRAINT campaigns_state_check
                CHECK (state IN ('pending', 'scheduled', 'running', 'paused', 'completed', 'cancelled', 'failed'))
            """,
        ])
    }

    private static var version11: Migration {
        Migration(version: 11, name: "throttled campaigns", statements: [
            // Notifications per second, fleet-wide, that the workers keep the campaign to (a token
            // bucket in Redis); NULL sends as fast as the fleet can.
            "ALTER TABLE campaigns ADD COLUMN rate_limit integer CHECK (rate_limit IS NULL OR rate_limit > 0)"
        ])
    }

    private static var version10: Migration {
        Migration(version: 10, name: "rejections written without foreign-key checks", statements: [
            // A rejection writes a `token_failures` row and a `device_tokens` upsert, and each paid
            // a foreign-key trigger (7.5 and 7.2 of about 45 µs per rejection, measured with
            // EXPLAIN ANALYZE on 10,000-row batches): a third of the coordinator's serial write
            // path, which bounds how many rejections a second one coordinator folds. Neither check
            // guards anything the code does not: failures are written in the transaction that
            // holds their campaign's row lock, app ids come only from `apps`, and no app is ever
            // deleted. The cascade the campaign key gave is done by `pruneNotifications`.
            "ALTER TABLE token_failures DROP CONSTRAINT IF EXISTS token_failures_campaign_id_fkey",
            "ALTER TABLE device_tokens DROP CONSTRAINT IF EXISTS device_tokens_app_id_fkey",
        ])
    }

    private static var version9: Migration {
        Migration(version: 9, name: "notifications, API keys", statements: [
            // A notification (a doorbell ring to a user's or a group's devices) is a campaign of
            // one shard, worked from its topic's notification lane. A constant default: adding the
            // column rewrites no row.
            "ALTER TABLE campaigns ADD COLUMN kind text NOT NULL DEFAULT 'campaign' CHECK (kind IN ('campaign', 'notification'))",
            // Whom it was sent to, as asked: "user:U", "group:G" or "tokens".
            "ALTER TABLE campaigns ADD COLUMN audience text",
            // Lists of the newest campaigns (the dashboard, `campaign list`) skip the rings, of
            // which a doorbell makes thousands a day; pruning finds old rings.
            "CREATE INDEX campaigns_kind_created ON campaigns (kind, created_at)",
            "CREATE INDEX campaigns_notifications_finished ON campaigns (finished_at) WHERE kind = 'notification'",
            // Keys of `pushfleet api`: a request shows `pf_<key_id>_<secret>`; only the secret's
            // SHA-256 is kept. A key may act on its topics only.
            """
            CREATE TABLE api_keys (
                key_id      text PRIMARY KEY,
                secret_hash bytea NOT NULL CHECK (octet_length(secret_hash) = 32),
                topics      text[] NOT NULL,
                label       text,
                created_at  timestamptz NOT NULL DEFAULT now(),
                revoked_at  timestamptz
            )
            """,
        ])
    }

    private static var version8: Migration {
        Migration(version: 8, name: "users, device owners, device groups", statements: [
            """
            CREATE TABLE users (
                user_id    text PRIMARY KEY CHECK (octet_length(user_id) BETWEEN 1 AND 200),
                created_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            // One phone, one owner: a token's row names the user whose registration is the latest
            // (`owned_at`; imports raise `registered_at`, never this). Nullable and unchecked, so
            // adding them to a registry of millions rewrites no row; the key is NOT VALID so that it
            // does not scan them either (every row has NULL, new rows are checked).
            "ALTER TABLE device_tokens ADD COLUMN user_id text, ADD COLUMN owned_at timestamptz, ADD COLUMN platform text",
            "ALTER TABLE device_tokens ADD CONSTRAINT device_tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES users ON DELETE SET NULL NOT VALID",
            "CREATE INDEX device_tokens_owner ON device_tokens (user_id, app_id) WHERE user_id IS NOT NULL",
            // A doorbell, a household: users who share one, and so each other's rings.
            """
            CREATE TABLE device_groups (
                group_id   text PRIMARY KEY CHECK (octet_length(group_id) BETWEEN 1 AND 200),
                created_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            """
            CREATE TABLE group_members (
                group_id text NOT NULL REFERENCES device_groups ON DELETE CASCADE,
                user_id  text NOT NULL REFERENCES users ON DELETE CASCADE,
                PRIMARY KEY (group_id, user_id)
            )
            """,
            "CREATE INDEX group_members_user ON group_members (user_id)",
        ])
    }

    private static var version7: Migration {
        Migration(version: 7, name: "shard sent marks", statements: [
            // Each shard's `sent` mark (the end of what was handed to senders) in the fold that
            // wrote its cursor: when Redis loses the queue, re-sends of positions below it are
            // counted by `in_flight`, and a worker's report of its lost run counts only those past it.
            "ALTER TABLE campaign_shards ADD COLUMN sent integer NOT NULL DEFAULT 0",
        ])
    }

    private static var version6: Migration {
        Migration(version: 6, name: "queue snapshots", statements: [
            // Tokens handed to senders past their shard's cursor at the last fold (campaign_shards
            // holds the cursors of the same snapshot): if Redis loses the queue, they may have been
            // sent, and count as re-sent when it is rebuilt.
            "ALTER TABLE campaigns ADD COLUMN in_flight bigint NOT NULL DEFAULT 0",
            // Raised each time the queue is rebuilt: a fold of the queue before (a coordinator's
            // write that was abandoned and commits late) is refused, never mixed with the new one.
            "ALTER TABLE campaigns ADD COLUMN queue_generation integer NOT NULL DEFAULT 0",
            // The highest fold number (`fold` in the meta hash, raised by each snapshot) folded: a
            // Redis whose number is not above it is an old copy (a stale RDB file, a lagging
            // replica), and its queue is rebuilt.
            "ALTER TABLE campaigns ADD COLUMN fold_sequence bigint NOT NULL DEFAULT 0",
        ])
    }

    private static var version5: Migration {
        Migration(version: 5, name: "durable shard tokens", statements: [
            // Each shard's tokens as one launch read them (a length byte, then the token's bytes,
            // for every token): the durable copy of a campaign's audience beside Redis' queue. Keyed
            // by launch, so concurrent launches of one id never overwrite each other; the campaign
            // row names the launch whose shards it has.
            """
            CREATE TABLE campaign_shard_tokens (
                campaign_id uuid NOT NULL,
                launch      text NOT NULL,
                shard       integer NOT NULL,
                tokens      bytea NOT NULL,
                created_at  timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (campaign_id, launch, shard)
            )
            """,
            // Random bytes do not compress: store them out of line without trying.
            "ALTER TABLE campaign_shard_tokens ALTER COLUMN tokens SET STORAGE EXTERNAL",
            "CREATE INDEX campaign_shard_tokens_created ON campaign_shard_tokens (created_at)",
            "ALTER TABLE campaigns ADD COLUMN launch text",
        ])
    }

    private static var version4: Migration {
        Migration(version: 4, name: "resume after an APNs outage", statements: [
            // A campaign PushFleet paused because APNs was down is resumed at this time; the count
            // of such pauses doubles the wait each time.
            "ALTER TABLE campaigns ADD COLUMN auto_resume_at timestamptz",
            "ALTER TABLE campaigns ADD COLUMN outage_pauses integer NOT NULL DEFAULT 0",
        ])
    }

    private static var version3: Migration {
        Migration(version: 3, name: "queue cleanup, token failure retention, dead shards", statements: [
            // Whether a finished campaign's Redis keys are gone: a cleanup that failed is retried.
            "ALTER TABLE campaigns ADD COLUMN queue_removed boolean NOT NULL DEFAULT false",
            // Campaigns settled before this version had their keys removed then.
            "UPDATE campaigns SET queue_removed = true WHERE state IN ('completed', 'failed') OR (state = 'cancelled' AND cancelled > 0)",
            "CREATE INDEX campaigns_cleanup ON campaigns (created_at) WHERE NOT queue_removed AND state IN ('completed', 'cancelled')",
            // Shards given up on after too many claims, and why a campaign is failed or paused.
            "ALTER TABLE campaigns ADD COLUMN dead_shards bigint[] NOT NULL DEFAULT '{}'",
            "ALTER TABLE campaigns ADD COLUMN state_reason text",
            // Token failures are pruned by age.
            "CREATE INDEX token_failures_observed ON token_failures (observed_at)",
        ])
    }

    private static var version2: Migration {
        Migration(version: 2, name: "retried requests", statements: [
            "ALTER TABLE campaigns ADD COLUMN retried bigint NOT NULL DEFAULT 0"
        ])
    }

    private static var version1: Migration {
        Migration(version: 1, name: "registry, campaigns, progress", statements: [
            """
            CREATE TABLE apps (
                app_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                topic       text NOT NULL,
                environment text NOT NULL CHECK (environment IN ('production', 'sandbox')),
                created_at  timestamptz NOT NULL DEFAULT now(),
                UNIQUE (topic, environment)
            )
            """,
            // The primary key is the registry's uniqueness and the import upsert's conflict target; the
            // partial index serves `launch --from-registry`'s keyset pages over active tokens only.
            """
            CREATE TABLE device_tokens (
                app_id         bigint NOT NULL REFERENCES apps,
                token          bytea NOT NULL CHECK (octet_length(token) BETWEEN 1 AND 255),
                status         text NOT NULL DEFAULT 'active'
                               CHECK (status IN ('active', 'invalid', 'unregistered', 'quarantined')),
                registered_at  timestamptz NOT NULL,
                invalid_since  timestamptz,
                invalid_reason text,
                PRIMARY KEY (app_id, token)
            )
            """,
            "CREATE INDEX device_tokens_active ON device_tokens (app_id, token) WHERE status = 'active'",
            """
            CREATE TABLE campaigns (
                campaign_id        uuid PRIMARY KEY,
                app_id             bigint NOT NULL REFERENCES apps,
                payload            bytea NOT NULL,
                push_type          text NOT NULL,
                priority           integer NOT NULL,
                expiration         bigint NOT NULL,
                collapse_id        text,
                shard_size         integer NOT NULL,
                shard_count        integer NOT NULL,
                total_tokens       bigint NOT NULL,
                duplicates_dropped bigint NOT NULL DEFAULT 0,
                state              text NOT NULL DEFAULT 'pending'
                                   CHECK (state IN ('pending', 'running', 'paused', 'completed', 'cancelled', 'failed')),
                accepted           bigint NOT NULL DEFAULT 0,
                resent             bigint NOT NULL DEFAULT 0,
                cancelled          bigint NOT NULL DEFAULT 0,
                done_shards        integer NOT NULL DEFAULT 0,
                last_event_id      text NOT NULL DEFAULT '0-0',
                last_event_ms      bigint NOT NULL DEFAULT 0,
                last_event_seq     bigint NOT NULL DEFAULT 0,
                created_at         timestamptz NOT NULL DEFAULT now(),
                started_at         timestamptz,
                finished_at        timestamptz,
                updated_at         timestamptz NOT NULL DEFAULT now()
            )
            """,
            "CREATE INDEX campaigns_state ON campaigns (state, created_at)",
            "CREATE INDEX campaigns_app ON campaigns (app_id)",
            """
            CREATE TABLE campaign_rejections (
                campaign_id uuid NOT NULL REFERENCES campaigns ON DELETE CASCADE,
                reason      text NOT NULL,
                count       bigint NOT NULL,
                PRIMARY KEY (campaign_id, reason)
            )
            """,
            """
            CREATE TABLE campaign_shards (
                campaign_id uuid NOT NULL REFERENCES campaigns ON DELETE CASCADE,
                shard       integer NOT NULL,
                token_count integer NOT NULL,
                state       text NOT NULL DEFAULT 'pending',
                cursor      integer NOT NULL DEFAULT 0,
                updated_at  timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (campaign_id, shard)
            )
            """,
            // One row per rejected token and campaign: a re-sent token rejected again is not counted twice.
            """
            CREATE TABLE token_failures (
                campaign_id    uuid NOT NULL REFERENCES campaigns ON DELETE CASCADE,
                token          bytea NOT NULL,
                reason         text NOT NULL,
                shard          integer NOT NULL,
                observed_at    timestamptz NOT NULL DEFAULT now(),
                apns_timestamp bigint,
                PRIMARY KEY (campaign_id, token)
            )
            """,
        ])
    }
}
