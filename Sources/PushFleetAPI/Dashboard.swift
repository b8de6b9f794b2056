import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
import PushFleetServices
import Synchronization

/// The read-only dashboard at `/`: one static page whose small script reads `/dashboard.json`
/// every second (`?refresh_ms=` changes it) and redraws: the latest campaigns with progress bars,
/// rate (since start, and over its readings of the last 10 seconds), ETA, rejections by reason and dead
/// shards, and the workers alive. It shows no token and changes nothing.
enum Dashboard {
    /// Campaigns shown: the newest, whatever their state.
    static let campaignLimit = 20
    /// A worker is alive if it said so within this window (it says so every 2 seconds).
    static let aliveWindow: Duration = .seconds(10)

    /// The last answer, reused for a quarter of a second: however many pages are open, the
    /// dashboard reads Postgres and Redis at most about four times a second.
    final class Cache: Sendable {
        private let last = Mutex<(at: ContinuousClock.Instant, json: String)?>(nil)

        func json(store: CampaignStore, queue: CampaignQueue) async throws -> String {
            if let last = self.last.withLock({ $0 }), ContinuousClock.now - last.at < .milliseconds(250) { return last.json }
            let json = try await Dashboard.json(store: store, queue: queue)
            self.last.withLock { $0 = (ContinuousClock.now, json) }
            return json
        }
    }

    /// `/dashboard.json`: `{"generated_at", "campaigns": [status objects], "workers": [...]}`.
    static func json(store: CampaignStore, queue: CampaignQueue) async throws -> String {
        let campaigns = try await store.recentCampaigns(in: CampaignState.allCases, limit: Self.campaignLimit)
        let workers = try await queue.aliveWorkers(within: Self.aliveWindow)
        let answer = Answer(generatedAt: StatusReport.timestamp(Date()), campaigns: campaigns.map { StatusReport(record: $0) }, workers: workers.map(Worker.init))
        return PushFleetJSON.encode(answer)
    }

    /// The object of `/dashboard.json`.
    struct Answer: Encodable {
        let generatedAt: String
        let campaigns: [StatusReport]
        let workers: [Worker]

        enum CodingKeys: String, CodingKey {
            case generatedAt = "generated_at"
            case campaigns, workers
        }
    }

    /// A worker alive: its name, topic and environment, and when it last said so.
    struct Worker: Encodable {
        let presence: CampaignQueue.WorkerPresence

        enum CodingKeys: String, CodingKey {
            case worker, topic, environment
            case lastSeen = "last_seen"
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(self.presence.worker, forKey: .worker)
            try container.encode(self.presence.topic, forKey: .topic)
            try container.encode(self.presence.environment.rawValue, forKey: .environment)
            try container.encode(StatusReport.timestamp(self.presence.lastSeen), forKey: .lastSeen)
        }
    }

    static let page = #"""
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <title>PushFleet</title>
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <style>
      body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
      h1 { font-size: 1.4em; margin: 0 0 .2em; }
      #status { color: #666; margin-bottom: 1.5em; }
      #status.error { color: #b00; }
      table { border-collapse: collapse; width: 100%; }
      th, td { text-align: left; padding: .35em .6em; border-bottom: 1px solid #e4e4e4; vertical-align: top; }
      th { font-weight: 600; color: #555; }
      .bar { width: 14em; height: .9em; background: #eee; border-radius: .45em; overflow: hidden; }
      .fill { height: 100%; background: #2a7; }
      .state-paused .fill { background: #d90; }
      .state-failed .fill, .state-cancelled .fill { background: #b44; }
      .num { font-variant-numeric: tabular-nums; }
      .small { color: #666; font-size: .9em; }
    </style>
    </head>
    <body>
    <h1>PushFleet</h1>
    <div id="status">loading…</div>
    <h2>Campaigns</h2>
    <table>
      <thead><tr><th>Campaign</th><th>State</th><th>Progress</th><th>Rate</th><th>ETA</th><th>Rejected</th><th>Dead shards</th></tr></thead>
      <tbody id="campaigns"></tbody>
    </table>
    <h2>Workers alive: <span id="worker-count">0</span></h2>
    <table>
      <thead><tr><th>Worker</th><th>Topic</th><th>Environment</th><th>Last seen</th></tr></thead>
      <tbody id="workers"></tbody>
    </table>
    <script>
    "use strict";
    const refreshMs = Number(new URLSearchParams(location.search).get("refresh_ms")) || 1000;
    // Each campaign's readings of the last 10 seconds: the rate now is what settled over them.
    const readings = new Map();
    const windowMs = 10000;

    function cell(row, text, className) {
      const td = document.createElement("td");
      td.textContent = text;
      if (className) td.className = className;
      row.appendChild(td);
      return td;
    }

    function renderCampaigns(campaigns, now) {
      const body = document.getElementById("campaigns");
      body.replaceChildren();
      for (const c of campaigns) {
        const rejected = Object.values(c.rejected).reduce((a, b) => a + b, 0);
        const settled = c.accepted + rejected;
        const seen = (readings.get(c.id) || []).filter(r => now - r.at <= windowMs);
        let rateNow = 0;
        if (seen.length > 0 && now > seen[0].at) rateNow = (settled - seen[0].settled) * 1000 / (now - seen[0].at);
        seen.push({ settled, at: now });
        readings.set(c.id, seen);

        const row = document.createElement("tr");
        row.className = "state-" + c.state;
        row.dataset.campaign = c.id;
        row.dataset.accepted = c.accepted;
        row.dataset.settled = settled;
        const name = cell(row, c.id.slice(0, 8));
        const topic = document.createElement("div");
        topic.className = "small";
        topic.textContent = c.topic + " (" + c.environment + ")";
        name.appendChild(topic);
        cell(row, c.state + (c.reason ? ": " + c.reason : ""));
        const progress = cell(row, "");
        const bar = document.createElement("div");
        bar.className = "bar";
        const fill = document.createElement("div");
        fill.className = "fill";
        const percent = c.total > 0 ? 100 * (settled + c.cancelled) / c.total : 0;
        fill.style.width = percent.toFixed(1) + "%";
        bar.appendChild(fill);
        progress.appendChild(bar);
        const counts = document.createElement("div");
        counts.className = "small num";
        counts.textContent = settled.toLocaleString("en") + " / " + c.total.toLocaleString("en") + " (" + percent.toFixed(1) + "%)";
        progress.appendChild(counts);
        const rate = cell(row, Math.round(c.rate).toLocaleString("en") + "/s avg", "num");
        const live = document.createElement("div");
        live.className = "small num live-rate";
        live.dataset.rate = Math.round(rateNow);
        live.textContent = Math.round(rateNow).toLocaleString("en") + "/s now";
        rate.appendChild(live);
        cell(row, c.eta_seconds === null ? "–" : Math.round(c.eta_seconds) + " s", "num");
        cell(row, rejected === 0 ? "0" : Object.entries(c.rejected).map(([reason, n]) => reason + " " + n).join(", "));
        cell(row, c.dead_shards.length === 0 ? "–" : c.dead_shards.join(", "));
        body.appendChild(row);
      }
    }

    function renderWorkers(workers) {
      const body = document.getElementById("workers");
      body.replaceChildren();
      for (const w of workers) {
        const row = document.createElement("tr");
        cell(row, w.worker);
        cell(row, w.topic);
        cell(row, w.environment);
        cell(row, w.last_seen);
        body.appendChild(row);
      }
      document.getElementById("worker-count").textContent = workers.length;
    }

    async function refresh() {
      const status = document.getElementById("status");
      try {
        const answer = await fetch("/dashboard.json", { cache: "no-store" });
        if (!answer.ok) throw new Error("HTTP " + answer.status);
        const data = await answer.json();
        const now = Date.now();
        renderCampaigns(data.campaigns, now);
        renderWorkers(data.workers);
        status.className = "";
        status.textContent = "updated " + data.generated_at;
      } catch (error) {
        status.className = "error";
        status.textContent = "cannot read /dashboard.json: " + error.message;
      }
      setTimeout(refresh, refreshMs);
    }
    refresh();
    </script>
    </body>
    </html>
    """#
}
