// hp-agent: the native board executor. Keeps a board running the plan its deployment says,
// from the plan's bundle (executor/bundle.py), on OpenVINO, and tells the service how that went,
// as `planner agent` does (executor/agent.py), with no Python on the board.
//
// Three threads, so inference never waits on the network:
//  - the poller long-polls GET /v1/deployments/{name}/plan with the last ETag (If-None-Match,
//    wait=); on a new plan it fetches GET /v1/plans/{id}/bundle (the manifest, whose sha256 is its
//    ETag) and each slice file (GET .../bundle/files/{sha256}, cached by hash), verifies every size
//    and sha256 (a mismatch or a truncated file is refused, reported as build_failed, and the
//    running plan keeps running) and compiles every slice before handing the plan over. When the
//    service is away it retries with capped, jittered exponential backoff.
//  - the inference loop (main thread) runs frames at --rate Hz (0: back to back); between two
//    frames it swaps to a newly compiled plan, so a frame runs wholly on one plan.
//  - the sender cuts telemetry batches (the Python agent's schema: planner/core/telemetry.py
//    TelemetryBatch) every --batch-s and at every swap, and posts them oldest first; a batch is
//    resent with its id until the service answers (5xx, 408, 429, no answer: retried).
// SIGTERM/SIGINT: the loop ends after the frame in flight, the telemetry left is posted (up to
// --drain-s), and the stats are printed as JSON on stdout. One log line per event on stderr.
//
// --bundle DIR runs a bundle from a directory, without a service (the benchmark's and the
// output check's mode).
#include "common.hpp"

#include <curl/curl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

using hp::json;
using Clock = std::chrono::steady_clock;

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

void log(const std::string& msg) { hp::log_line("native-agent", msg); }

constexpr size_t MAX_PLAN_BYTES = 4 * 1024 * 1024;
constexpr size_t MAX_FILE_BYTES = size_t(2) * 1024 * 1024 * 1024;
constexpr size_t MAX_BATCH_SAMPLES = 10000;     // TelemetryBatch's bound
constexpr size_t MAX_BATCH_BYTES = 512 * 1024;  // under the service's telemetry body limit (1 MiB by default)
constexpr size_t MAX_ERRORS = 1000;

struct Options {
    std::string server, deployment, token, name, cache_dir = ".hp-agent-cache", bundle_dir, inputs_dir, dump_dir;
    double rate_hz = 10.0, duration_s = -1, batch_s = 2.0, poll_wait_s = 30.0, drain_s = 5.0, backoff_lo = 0.2,
           backoff_hi = 5.0;
    long frames = -1, warmup = 0;
    size_t max_pending = 1000;
};

// ------------------------------------------------------------------ HTTP (libcurl)
struct Answer {
    long status = 0;
    std::string body, etag, error;  // error: a transport failure (no answer)
};

struct Transfer {
    std::string* body;
    size_t limit;
    bool over = false;
};

size_t on_body(char* p, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    if (t->body->size() + size * n > t->limit) {
        t->over = true;
        return 0;
    }
    t->body->append(p, size * n);
    return size * n;
}

size_t on_header(char* p, size_t size, size_t n, void* user) {
    std::string line(p, size * n);
    auto colon = line.find(':');
    if (colon != std::string::npos) {
        std::string key = line.substr(0, colon);
        for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (key == "etag") {
            std::string v = line.substr(colon + 1);
            v.erase(0, v.find_first_not_of(" \t"));
            v.erase(v.find_last_not_of(" \t\r\n") + 1);
            *static_cast<std::string*>(user) = v;
        }
    }
    return size * n;
}

int on_progress(void*, curl_off_t, curl_off_t, curl_off_t, curl_off_t) { return g_stop.load() ? 1 : 0; }

Answer http(const std::string& method, const std::string& url, const std::vector<std::string>& headers,
            const std::string* payload, double timeout_s, size_t limit, bool abort_on_stop = true) {
    Answer a;
    CURL* c = curl_easy_init();
    if (!c) {
        a.error = "curl_easy_init failed";
        return a;
    }
    Transfer t{&a.body, limit};
    curl_slist* list = nullptr;
    for (auto& h : headers) list = curl_slist_append(list, h.c_str());
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_s * 1000));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &a.etag);
    if (abort_on_stop) {  // a long-poll in flight ends with SIGTERM, not after `wait`
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    }
    if (method == "POST") {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload->data());
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(payload->size()));
    }
    CURLcode rc = curl_easy_perform(c);
    if (t.over) a.error = "the answer is over " + std::to_string(limit) + " bytes";
    else if (rc != CURLE_OK) a.error = curl_easy_strerror(rc);
    else curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
    curl_slist_free_all(list);
    curl_easy_cleanup(c);
    return a;
}

std::string unquote(std::string s) {
    if (s.rfind("W/", 0) == 0) s = s.substr(2);
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
    return s;
}

// A bundle that could not be fetched for now (no answer, 5xx, 408, 429, or none made yet: 404):
// retried with backoff, the deployment's ETag kept unanswered so the plan is asked for again.
struct Transient : std::runtime_error {
    using std::runtime_error::runtime_error;
};

bool transient(const Answer& a) {
    return !a.error.empty() || a.status >= 500 || a.status == 408 || a.status == 429 || a.status == 404;
}

// ------------------------------------------------------------------ the agent
struct Sample {
    double latency_ms;
    std::vector<double> slice_ms;
};

struct Batch {
    std::string id;
    json body;
    size_t samples;
};

struct Stats {
    long frames = 0, failed_frames = 0, swaps = 0, build_failures = 0, batches_sent = 0, batches_dropped = 0,
         samples_dropped = 0, bad_plans = 0, reconnects = 0, idle_waits = 0;
    std::vector<std::string> plans;
};

class Agent {
public:
    explicit Agent(Options o) : opt_(std::move(o)), rng_(std::random_device{}()) {
        if (opt_.name.empty()) {
            std::ostringstream s;
            s << "native-" << std::hex << (rng_() & 0xffffffu);
            opt_.name = s.str();
        }
        if (!opt_.token.empty()) auth_ = "Authorization: Bearer " + opt_.token;
        while (!opt_.server.empty() && opt_.server.back() == '/') opt_.server.pop_back();
    }

    int run();

private:
    Options opt_;
    std::mt19937 rng_;
    std::string auth_, etag_, waiting_for_;  // waiting_for_: a plan whose bundle is being retried
    Stats stats_;
    std::mutex lock_;
    std::condition_variable wake_;
    std::unique_ptr<hp::Bundle> pending_, current_;
    std::vector<Sample> samples_;
    std::map<std::tuple<std::string, std::string, std::string, long>, long> errors_;
    std::deque<Batch> outbox_;
    long seq_ = 0;
    std::vector<double> frame_ms_;
    std::vector<std::vector<double>> slice_ms_all_, infer_ms_all_;

    std::vector<std::string> headers(bool json_body = false) const {
        std::vector<std::string> h;
        if (!auth_.empty()) h.push_back(auth_);
        if (json_body) h.push_back("Content-Type: application/json");
        return h;
    }

    void error(const std::string& kind, std::string message, const std::string& plan_id = "", long revision = -1) {
        // what a runtime or a server said may hold NUL, which the service refuses (invalid UTF-8 is
        // replaced when the batch is written)
        for (size_t at = message.find('\0'); at != std::string::npos; at = message.find('\0', at + 2))
            message.replace(at, 1, "\\0");
        if (message.size() > 1000) message.resize(1000);
        std::lock_guard<std::mutex> g(lock_);
        auto key = std::make_tuple(kind, message, plan_id, revision);
        if (!errors_.count(key) && errors_.size() >= MAX_ERRORS - 1)
            key = std::make_tuple(std::string("other"), std::string("more distinct errors than a batch holds; not itemised"),
                                  std::string(), -1L);
        errors_[key] = std::min(errors_[key] + 1, 10000000L);
    }

    void sleep_backoff(int attempt) {
        std::uniform_real_distribution<double> jitter(0.5, 1.0);
        std::unique_lock<std::mutex> g(lock_);  // rng_ is the sender's too
        double s = std::min(opt_.backoff_hi, opt_.backoff_lo * std::pow(2.0, std::min(attempt, 10))) * jitter(rng_);
        wake_.wait_for(g, std::chrono::duration<double>(s), [] { return g_stop.load(); });
    }

    // -------------------------------------------------------------- poller
    std::unique_ptr<hp::Bundle> fetch_bundle(const std::string& plan_id) {
        auto m = http("GET", opt_.server + "/v1/plans/" + plan_id + "/bundle", headers(), nullptr, 30, MAX_PLAN_BYTES);
        if (transient(m))
            throw Transient("bundle manifest: " + (m.error.empty() ? "HTTP " + std::to_string(m.status) + " " +
                                                                         m.body.substr(0, 300) : m.error));
        if (m.status != 200)
            throw hp::BundleError("bundle manifest: HTTP " + std::to_string(m.status) + " " + m.body.substr(0, 300));
        const std::string id = hp::sha256_hex(m.body);
        if (!m.etag.empty() && unquote(m.etag) != id)
            throw hp::BundleError("bundle manifest: its sha256 is not its ETag (altered or truncated in transit)");
        auto manifest = hp::check_manifest(m.body);
        if (manifest.value("plan_id", std::string()) != plan_id)
            throw hp::BundleError("manifest.plan_id: not the deployed plan " + plan_id);
        mkdir(opt_.cache_dir.c_str(), 0755);
        size_t i = 0;
        for (auto& s : manifest["slices"]) {
            const std::string sha = s["sha256"].get<std::string>();
            const std::string path = opt_.cache_dir + "/" + sha + ".onnx";
            bool cached = false;
            try {
                hp::verify_slice(s, hp::read_file(path), i);
                cached = true;
            } catch (const hp::BundleError&) {
            }
            if (!cached) {
                auto f = http("GET", opt_.server + "/v1/plans/" + plan_id + "/bundle/files/" + sha, headers(), nullptr, 300,
                              MAX_FILE_BYTES);
                if (transient(f))
                    throw Transient("bundle file " + s["file"].get<std::string>() + ": " +
                                    (f.error.empty() ? "HTTP " + std::to_string(f.status) : f.error));
                if (f.status != 200)
                    throw hp::BundleError("bundle file " + s["file"].get<std::string>() + ": HTTP " + std::to_string(f.status));
                hp::verify_slice(s, f.body, i);  // refused before it touches the cache or the running plan
                hp::write_file_atomic(path, f.body);
            }
            ++i;
        }
        auto b = hp::compile_bundle(manifest, opt_.cache_dir, true);
        b->bundle_id = id;
        return b;
    }

    void poll_once() {
        std::vector<std::string> h = headers();
        if (!etag_.empty()) h.push_back("If-None-Match: " + etag_);
        std::ostringstream url;
        url << opt_.server << "/v1/deployments/" << opt_.deployment << "/plan?wait=" << opt_.poll_wait_s;
        auto a = http("GET", url.str(), h, nullptr, opt_.poll_wait_s + 10, MAX_PLAN_BYTES);
        if (!a.error.empty()) throw std::runtime_error(a.error);
        if (a.status == 304 || a.status == 404) return;
        if (a.status != 200) {
            error("plan_fetch_failed", std::to_string(a.status) + ": " + a.body.substr(0, 300));
            throw std::runtime_error("HTTP " + std::to_string(a.status));
        }
        std::string plan_id;
        long revision = -1;
        bool verify = false;
        try {
            auto answer = json::parse(a.body);
            plan_id = answer.at("plan").at("plan_id").get<std::string>();
            revision = answer.at("revision").get<long>();
            verify = answer.contains("verify") && !answer["verify"].is_null();
        } catch (const json::exception& e) {
            stats_.bad_plans++;
            error("invalid_plan", std::string("the answer is not a plan: ") + e.what());
            log(std::string("the service's plan answer is unusable, keeping the current plan: ") + e.what());
            return;
        }
        const bool again = plan_id == waiting_for_;
        if (verify && !again) skip_verification(plan_id, revision);
        if (!again) log("plan " + plan_id + " revision " + std::to_string(revision) + ": fetching its bundle");
        try {
            auto t0 = Clock::now();
            auto b = fetch_bundle(plan_id);
            b->revision = revision;
            log("plan " + plan_id + " revision " + std::to_string(revision) + ": bundle " + b->bundle_id.substr(0, 12) +
                " verified, " + std::to_string(b->slices.size()) + " slice(s) compiled in " +
                std::to_string(std::chrono::duration<double>(Clock::now() - t0).count()).substr(0, 5) + " s");
            std::lock_guard<std::mutex> g(lock_);
            std::swap(pending_, b);  // a newer plan replaces one not taken yet: b, freed outside the lock
        } catch (const Transient& e) {
            if (!again) {  // once per plan: the retries are quiet
                error("build_failed", std::string("not fetched yet, retrying: ") + e.what(), plan_id, revision);
                log("plan " + plan_id + " revision " + std::to_string(revision) + ": bundle not fetched (" + e.what() +
                    "); retrying with backoff, keeping the current plan");
            }
            waiting_for_ = plan_id;
            throw;  // the poller backs off; the ETag stays, so the plan is asked for again
        } catch (const std::exception& e) {
            stats_.build_failures++;
            error("build_failed", e.what(), plan_id, revision);
            log("plan " + plan_id + " revision " + std::to_string(revision) + " refused, keeping the current plan: " +
                e.what());
        }
        waiting_for_.clear();
        etag_ = a.etag;
    }

    // A revision activated with `verify` waits for the board's figures or its reason not to measure:
    // this agent serves bundles and does not time candidates (planner agent does), and says so.
    void skip_verification(const std::string& plan_id, long revision) {
        const std::string body = json{{"revision", revision}, {"plan_id", plan_id}, {"agent", opt_.name},
                                      {"skipped", "the native agent (hp-agent) does not measure candidates; it serves the "
                                                  "revision's plan from its bundle"}}.dump(-1, ' ', false, json::error_handler_t::replace);
        auto a = http("POST", opt_.server + "/v1/deployments/" + opt_.deployment + "/verification", headers(true), &body, 30,
                      64 * 1024);
        if (a.error.empty() && a.status == 200)
            log("revision " + std::to_string(revision) + " verification skipped: posted why");
        else
            log("the service did not take revision " + std::to_string(revision) + "'s verification skip: " +
                (a.error.empty() ? std::to_string(a.status) + " " + a.body.substr(0, 300) : a.error));
    }

    void poller() {
        int failures = 0, retries = 0;  // the plan unreachable; its bundle not fetched yet
        while (!g_stop.load()) {
            try {
                poll_once();
                if (failures) log("service reachable again");
                failures = retries = 0;
                continue;
            } catch (const Transient&) {
                if (g_stop.load()) break;
                sleep_backoff(++retries);
                continue;
            } catch (const std::exception& e) {
                if (g_stop.load()) break;
                if (failures == 0) {
                    log(std::string("cannot fetch the plan (") + e.what() + "); retrying with backoff");
                    stats_.reconnects++;
                }
            }
            sleep_backoff(++failures);
        }
    }

    // -------------------------------------------------------------- sender
    json regime() const {
        json r = {{"mode", opt_.rate_hz > 0 ? "rate" : "back_to_back"}};
        if (opt_.rate_hz > 0) r["rate_hz"] = opt_.rate_hz;
        return r;
    }

    // the samples and errors so far as batches on the outbox (caller holds lock_)
    void cut_locked() {
        if (samples_.empty() && errors_.empty()) return;
        json errs = json::array();
        for (auto& [k, count] : errors_) {
            json e = {{"kind", std::get<0>(k)}, {"message", std::get<1>(k)}, {"count", count}};
            if (!std::get<2>(k).empty()) e["plan_id"] = std::get<2>(k);
            if (std::get<3>(k) >= 0) e["revision"] = std::get<3>(k);
            errs.push_back(e);
        }
        errors_.clear();
        // samples per batch: a sample's JSON is at most ~30 bytes per time and ~40 more
        const size_t per = samples_.empty() ? 1 : 40 + 30 * (samples_.front().slice_ms.size() + 1);
        const size_t cap = std::max<size_t>(1, std::min(MAX_BATCH_SAMPLES, MAX_BATCH_BYTES / per));
        size_t start = 0;
        do {
            size_t end = std::min(samples_.size(), start + cap);
            json ss = json::array();
            for (size_t i = start; i < end; ++i) ss.push_back({{"latency_ms", std::max(samples_[i].latency_ms, 1e-6)},
                                                               {"slice_ms", samples_[i].slice_ms}});
            std::ostringstream id;
            id << opt_.name << "-" << ++seq_ << "-" << std::hex << (rng_() & 0xffffffu);
            json b = {{"batch_id", id.str()}, {"agent", opt_.name}, {"samples", ss}, {"errors", errs}, {"regime", regime()}};
            if (!ss.empty() && current_) {
                b["plan_id"] = current_->plan_id;
                b["revision"] = current_->revision;
                b["regime"]["pool"] = current_->pool;
            }
            outbox_.push_back({id.str(), b, end - start});
            errs = json::array();
            start = end;
        } while (start < samples_.size());
        samples_.clear();
        while (outbox_.size() > opt_.max_pending) {
            auto& d = outbox_.front();
            stats_.batches_dropped++;
            stats_.samples_dropped += static_cast<long>(d.samples);
            log("telemetry batch " + d.id + " dropped (" + std::to_string(d.samples) + " samples): the backlog is over " +
                std::to_string(opt_.max_pending) + " batches");
            outbox_.pop_front();
        }
    }

    // post the outbox oldest first; false when the service is away or busy (the batch stays)
    bool send_pending() {
        while (true) {
            std::string id, body;
            size_t n;
            {
                std::lock_guard<std::mutex> g(lock_);
                if (outbox_.empty()) return true;
                id = outbox_.front().id;
                body = outbox_.front().body.dump(-1, ' ', false, json::error_handler_t::replace);
                n = outbox_.front().samples;
            }
            auto a = http("POST", opt_.server + "/v1/deployments/" + opt_.deployment + "/telemetry", headers(true), &body,
                          10, 1024 * 1024, false);  // the answer to a post is small; a larger one is read, not retried
            if (!a.error.empty() || a.status >= 500 || a.status == 408 || a.status == 429) return false;
            std::lock_guard<std::mutex> g(lock_);
            if (!outbox_.empty() && outbox_.front().id == id) outbox_.pop_front();
            if (a.status == 200 || a.status == 201) {
                stats_.batches_sent++;
            } else {  // refused (403, 413, 422): resending will not help
                stats_.batches_dropped++;
                stats_.samples_dropped += static_cast<long>(n);
                log("telemetry batch " + id + " dropped (" + std::to_string(n) + " samples): refused: " +
                    std::to_string(a.status) + " " + a.body.substr(0, 300));
            }
        }
    }

    void sender() {
        bool away = false;
        while (true) {
            {
                std::unique_lock<std::mutex> g(lock_);
                if (wake_.wait_for(g, std::chrono::duration<double>(opt_.batch_s), [] { return g_stop.load(); })) break;
                cut_locked();
            }
            bool ok = send_pending();
            if (!ok && !away) log("cannot post telemetry; keeping it to resend");
            else if (ok && away) log("telemetry posted again");
            away = !ok;
        }
    }

    void drain() {
        {
            std::lock_guard<std::mutex> g(lock_);
            cut_locked();
        }
        auto deadline = Clock::now() + std::chrono::duration<double>(opt_.drain_s);
        while (Clock::now() < deadline) {
            if (send_pending()) {
                log("telemetry flushed");
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
        std::lock_guard<std::mutex> g(lock_);
        log("telemetry left unsent at exit: " + std::to_string(outbox_.size()) + " batch(es)");
    }

    // -------------------------------------------------------------- inference
    // Between two frames: the plan compiled by the poller becomes the current one. Only this
    // thread runs frames, so the previous plan is in no frame now: freed here, outside the lock.
    bool take_pending(std::map<std::string, ov::Tensor>& last_outputs) {
        std::unique_ptr<hp::Bundle> previous;
        std::lock_guard<std::mutex> g(lock_);
        if (!pending_) return false;
        last_outputs.clear();  // they are the previous plan's requests' tensors
        cut_locked();  // the samples so far belong to the previous plan
        previous = std::move(current_);
        current_ = std::move(pending_);
        stats_.swaps++;
        stats_.plans.push_back(current_->plan_id);
        log("now running plan " + current_->plan_id + " (revision " + std::to_string(current_->revision) + ")");
        return true;
    }

    bool serving(Clock::time_point start) const {
        if (g_stop.load()) return false;
        if (opt_.frames >= 0 && stats_.frames >= opt_.frames) return false;
        return opt_.duration_s < 0 || std::chrono::duration<double>(Clock::now() - start).count() < opt_.duration_s;
    }

    std::map<std::string, ov::Tensor> inputs_for(const hp::Bundle& b) {
        std::map<std::string, ov::Tensor> in;
        for (auto& spec : b.manifest["inputs"]) in[spec["name"].get<std::string>()] = hp::input_tensor(spec, opt_.inputs_dir);
        return in;
    }

    void loop();
    json stats_json() const;
};

void Agent::loop() {
    const bool paced = opt_.rate_hz > 0;
    const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(paced ? 1.0 / opt_.rate_hz : 0));
    auto start = Clock::now();
    auto next_at = start;
    std::map<std::string, ov::Tensor> inputs, outputs;
    bool fed = false;
    std::vector<double> slice_ms, infer_ms;
    long warm = 0;
    while (serving(start)) {
        if (take_pending(outputs)) fed = false;
        hp::Bundle* cur = current_.get();
        if (!cur) {  // nothing to run before the first plan arrives
            if (stats_.idle_waits++ == 0) log("waiting for a plan");
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            continue;
        }
        try {
            if (!fed) {
                inputs = inputs_for(*cur);
                fed = true;
            }
            auto t0 = Clock::now();
            outputs = hp::run_frame(*cur, inputs, slice_ms, &infer_ms);
            double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
            if (warm < opt_.warmup) {
                ++warm;
                continue;
            }
            {
                std::lock_guard<std::mutex> g(lock_);
                samples_.push_back({ms, slice_ms});
            }
            if (frame_ms_.size() < 1000000) {
                frame_ms_.push_back(ms);
                slice_ms_all_.push_back(slice_ms);
                infer_ms_all_.push_back(infer_ms);
            }
        } catch (const std::exception& e) {
            stats_.failed_frames++;
            error("inference_failed", e.what(), cur->plan_id, cur->revision);
            if (stats_.failed_frames == 1) log(std::string("a frame failed: ") + e.what());
        }
        stats_.frames++;
        if (paced) {
            next_at += period;
            auto now = Clock::now();
            if (next_at > now) {
                std::unique_lock<std::mutex> g(lock_);
                wake_.wait_until(g, next_at, [] { return g_stop.load(); });
            } else {
                next_at = now;  // behind: no burst to catch up
            }
        }
    }
    if (!opt_.dump_dir.empty() && !outputs.empty()) hp::dump_outputs(outputs, opt_.dump_dir);
}

// per-slice medians over the frames of the last plan's slice count
static json medians(const std::vector<std::vector<double>>& rows) {
    json out = json::array();
    if (rows.empty()) return out;
    const size_t n = rows.back().size();
    for (size_t k = 0; k < n; ++k) {
        std::vector<double> v;
        for (auto& r : rows)
            if (r.size() == n) v.push_back(r[k]);
        out.push_back(hp::median(v));
    }
    return out;
}

json Agent::stats_json() const {
    json slices = medians(slice_ms_all_), infers = medians(infer_ms_all_);
    return {{"agent", opt_.name},
            {"frames", stats_.frames},
            {"failed_frames", stats_.failed_frames},
            {"swaps", stats_.swaps},
            {"build_failures", stats_.build_failures},
            {"batches_sent", stats_.batches_sent},
            {"batches_dropped", stats_.batches_dropped},
            {"samples_dropped", stats_.samples_dropped},
            {"bad_plans", stats_.bad_plans},
            {"reconnects", stats_.reconnects},
            {"plans", stats_.plans},
            {"timed_frames", frame_ms_.size()},
            {"frame_ms_median", frame_ms_.empty() ? json(nullptr) : json(hp::median(frame_ms_))},
            {"slice_ms_median", slices},
            {"infer_ms_median", infers},
            {"peak_rss_kb", hp::peak_rss_kb()}};
}

int Agent::run() {
    if (!opt_.bundle_dir.empty()) {  // a local bundle, no service
        auto raw = hp::read_file(opt_.bundle_dir + "/manifest.json");
        auto manifest = hp::check_manifest(raw);
        size_t i = 0;
        for (auto& s : manifest["slices"]) hp::verify_slice(s, hp::read_file(opt_.bundle_dir + "/" + s["file"].get<std::string>()), i++);
        pending_ = hp::compile_bundle(manifest, opt_.bundle_dir, false);
        pending_->bundle_id = hp::sha256_hex(raw);
        log("bundle " + pending_->bundle_id.substr(0, 12) + " verified and compiled (" +
            std::to_string(pending_->slices.size()) + " slice(s))");
        loop();
        std::cout << stats_json().dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;
        return 0;
    }
    log("agent " + opt_.name + " serving deployment " + opt_.deployment + " from " + opt_.server);
    std::thread poll([this] { poller(); });
    std::thread send([this] { sender(); });
    loop();
    g_stop.store(true);
    wake_.notify_all();
    poll.join();
    send.join();
    drain();
    log("stopped after " + std::to_string(stats_.frames) + " frames");
    std::cout << stats_json().dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;
    return 0;
}

const char* USAGE =
    "hp-agent --server URL --deployment NAME [--token T | $PLANNER_TOKEN] [--name N] [--rate HZ (0: back to back)]\n"
    "         [--frames N] [--duration S] [--batch-s S] [--poll-wait S] [--drain-s S] [--backoff LO,HI]\n"
    "         [--cache DIR] [--inputs DIR (NAME.bin raw)] [--dump-outputs DIR] [--warmup N]\n"
    "hp-agent --bundle DIR [--frames N] [--rate HZ] [--inputs DIR] [--dump-outputs DIR] [--warmup N]\n";

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (const char* t = std::getenv("PLANNER_TOKEN")) o.token = t;
    std::vector<std::string> problems;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            std::cout << USAGE;
            return 0;
        }
        if (i + 1 >= argc) {
            problems.push_back(a + " needs a value");
            break;
        }
        std::string v = argv[++i];
        auto number = [&](double lo) {
            char* end = nullptr;
            double x = std::strtod(v.c_str(), &end);
            if (end == v.c_str() || *end || !(x >= lo)) problems.push_back(a + ": '" + v + "' is not a number >= " + std::to_string(lo).substr(0, 3));
            return x;
        };
        if (a == "--server") o.server = v;
        else if (a == "--deployment") o.deployment = v;
        else if (a == "--token") o.token = v;
        else if (a == "--name") o.name = v;
        else if (a == "--cache") o.cache_dir = v;
        else if (a == "--bundle") o.bundle_dir = v;
        else if (a == "--inputs") o.inputs_dir = v;
        else if (a == "--dump-outputs") o.dump_dir = v;
        else if (a == "--rate") o.rate_hz = number(0);
        else if (a == "--frames") o.frames = static_cast<long>(number(1));
        else if (a == "--warmup") o.warmup = static_cast<long>(number(0));
        else if (a == "--duration") o.duration_s = number(0);
        else if (a == "--batch-s") o.batch_s = number(0.01);
        else if (a == "--poll-wait") o.poll_wait_s = number(0);
        else if (a == "--drain-s") o.drain_s = number(0);
        else if (a == "--backoff") {
            auto comma = v.find(',');
            o.backoff_lo = std::atof(v.substr(0, comma).c_str());
            o.backoff_hi = comma == std::string::npos ? o.backoff_lo : std::atof(v.substr(comma + 1).c_str());
            if (!(o.backoff_lo > 0 && o.backoff_hi >= o.backoff_lo)) problems.push_back("--backoff: give LO,HI seconds, 0 < LO <= HI");
        } else problems.push_back("unknown option " + a);
    }
    if (o.bundle_dir.empty() && (o.server.empty() || o.deployment.empty()))
        problems.push_back("give --server and --deployment (or --bundle DIR to run a local bundle)");
    if (!problems.empty()) {
        for (auto& p : problems) log(p);
        std::cerr << USAGE;
        return 2;
    }
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = 1;
    try {
        rc = Agent(o).run();
    } catch (const std::exception& e) {
        log(std::string("cannot run: ") + e.what());
        rc = 1;
    }
    curl_global_cleanup();
    return rc;
}
