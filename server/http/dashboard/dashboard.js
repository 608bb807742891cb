// The dashboard's pages (index.html: jobs and workers; job.html: one job).
// Polls the coordinator's /api/ routes every two seconds and updates the
// page in place. Job data reaches the page as text only (textContent); the
// one exception, the figures, is markup the server rendered and escaped.
(function() {
'use strict';
var POLL_MS = 2000;
var TOKEN_KEY = 'autoaccel-token';
var page = document.body.getAttribute('data-page');
var loginShown = false;

function $(id) {
  return document.getElementById(id);
}

function el(tag, text, cls) {
  var e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function num(v) {
  return v === undefined || v === null ? 0 : Number(v);
}
function mib(bytes) {
  return (num(bytes) / 1048576).toFixed(1);
}
function gib(bytes) {
  return (num(bytes) / 1073741824).toFixed(1) + ' GiB';
}
function when(unix) {
  if (!unix) return '-';
  return new Date(unix * 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

// A GET of the API with the tab's token; resolves to the response, asks
// for a token on 401 and rejects.
function api(path, as) {
  var headers = {};
  var token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = 'Bearer ' + token;
  return fetch(path, {headers: headers, cache: 'no-store'}).then(function(r) {
    if (r.status === 401) {
      showLogin(token ? 'The coordinator does not know this token.' : '');
      throw new Error('unauthenticated');
    }
    if (!r.ok) {
      return r.json().then(
          function(body) {
            throw new Error(body.error || ('HTTP ' + r.status));
          },
          function() {
            throw new Error('HTTP ' + r.status);
          });
    }
    return as === 'text' ? r.text() : r.json();
  });
}

function showLogin(message) {
  loginShown = true;
  $('login').hidden = false;
  $('login-error').textContent = message;
}

function setupLogin() {
  $('token-save').addEventListener('click', function() {
    var token = $('token').value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    $('token').value = '';
    $('login').hidden = true;
    loginShown = false;
    poll();
  });
}

function showError(err) {
  if (err && err.message === 'unauthenticated') return;
  var p = $('error');
  p.hidden = false;
  p.textContent = 'Cannot update: ' + (err && err.message ? err.message : err);
}

function polled() {
  $('error').hidden = true;
  $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  var n = Number(document.documentElement.getAttribute('data-polls') || 0) + 1;
  document.documentElement.setAttribute('data-polls', String(n));
}

function replaceRows(tbody, rows) {
  while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
  rows.forEach(function(r) {
    tbody.appendChild(r);
  });
}

// ---- the worker pool (both pages) ----
function renderWorkers(list) {
  var workers = list.workers || [];
  var rows = [];
  workers.forEach(function(w) {
    var devices = w.devices && w.devices.length ? w.devices : [{}];
    devices.forEach(function(d, i) {
      var tr = el('tr');
      tr.setAttribute('data-worker', w.worker_id);
      tr.appendChild(el('td', i === 0 ? w.worker_id : '', 'mono'));
      tr.appendChild(el('td', i === 0 ? w.address : '', 'mono'));
      var jitter = num(w.timing_jitter) > 0 ?
          ', timing jitter ±' + (100 * num(w.timing_jitter)).toFixed(1) + '%' :
          '';
      tr.appendChild(
          el('td', i === 0 ? (w.healthy ? 'healthy' : 'lost') + jitter : '',
             w.healthy ? '' : 'unhealthy'));
      tr.appendChild(el(
          'td', d.type ? d.type + ':' + num(d.index) + (d.name ? ' (' + d.name + ')' : '') : '-'));
      tr.appendChild(el('td', d.memory_bytes ? gib(d.memory_bytes) : '-', 'num'));
      var holder = el('td', d.held_by_trial || 'free', d.held_by_trial ? 'held mono' : 'free');
      holder.setAttribute('data-holder', d.held_by_trial || '');
      tr.appendChild(holder);
      rows.push(tr);
    });
  });
  replaceRows(document.querySelector('#worker-table tbody'), rows);
  $('workers-none').hidden = workers.length > 0;
  // The first page of a large pool, and the whole pool's counts.
  var total = num(list.workers_total);
  $('workers-more').hidden = !list.next_page_token;
  $('workers-more').textContent = list.next_page_token ? 'Showing ' + workers.length + ' of ' +
          total + ' workers (' + num(list.workers_healthy) + ' healthy, ' + num(list.devices_free) +
          ' of ' + num(list.devices_total) + ' devices free); `autoaccel workers` lists them all.' :
                                                         '';
}

function pollWorkers() {
  return api('/api/workers').then(renderWorkers);
}

// ---- the job list ----
function stateCell(state) {
  return el('td', state, 'state-' + state);
}

function renderJobs(list) {
  var jobs = list.jobs || [];
  var rows = jobs.map(function(j) {
    var tr = el('tr');
    tr.setAttribute('data-job', j.job_id);
    tr.setAttribute('data-state', j.state || '');
    var link = el('a', j.job_id, 'mono');
    link.href = '/job?id=' + encodeURIComponent(j.job_id);
    var first = el('td');
    first.appendChild(link);
    tr.appendChild(first);
    tr.appendChild(stateCell(j.state));
    var done = num(j.trials_done) - num(j.trials_pruned);
    tr.appendChild(
        el('td',
           done + ' run, ' + num(j.trials_running) + ' running of ' + num(j.trials_total) +
               ' candidates'));
    var model = j.request && j.request.model ? j.request.model.family : '';
    tr.appendChild(el('td', model || (j.launcher ? 'launcher ' + j.launcher.name : '-')));
    tr.appendChild(el('td', j.owner || '-'));
    var best = j.best && j.best.metrics ? num(j.best.metrics.tokens_per_second) : 0;
    tr.appendChild(el('td', best > 0 ? best.toFixed(0) : '-', 'num'));
    tr.appendChild(el('td', when(j.created_at)));
    return tr;
  });
  replaceRows(document.querySelector('#job-table tbody'), rows);
  $('jobs-none').hidden = jobs.length > 0;
}

// ---- one job ----
var jobId = new URLSearchParams(location.search).get('id');
var version = '0';
var trials = {};  // trial_id -> trial, merged from each poll's changes

function renderJob(job) {
  document.title = 'autoaccel job ' + job.job_id;
  $('job-title').textContent = 'autoaccel job ' + job.job_id;
  var state = $('job-state');
  state.textContent = job.state;
  state.className = 'value state-' + job.state;
  $('job-running').textContent = num(job.trials_running);
  $('job-status').textContent = [job.algorithm, job.status_message].filter(Boolean).join(' — ');
  var answer = $('job-answer');
  answer.hidden = !(job.best && job.best.strategy);
  answer.textContent =
      job.best && job.best.strategy ? 'answer: ' + job.best.strategy.text + certainty(job) : '';
  answerFigure = num(job.best_figure);
  standingOf = {};
  (job.standings || []).forEach(function(st) {
    (st.trial_indices || []).forEach(function(i) {
      standingOf[i] = st;
    });
  });
  shownJob = job;
}

// Progress against the time limit (the bar), and the trials run against
// those that fit it: the ones run and running, plus as many more as the
// time left holds at the mean duration of the trials finished so far, on
// as many at once as run now (never more than the candidates left).
var shownJob = null;
function renderProgress() {
  var job = shownJob;
  if (!job) return;
  var limit = num(job.request && job.request.time_limit_seconds);
  var elapsed = num(job.elapsed_seconds);
  var ended = ['SUCCEEDED', 'FAILED', 'CANCELLED'].indexOf(job.state) >= 0;
  var run = num(job.trials_done) - num(job.trials_pruned);
  var running = num(job.trials_running);
  var open = Math.max(0, num(job.trials_total) - num(job.trials_pruned) - run - running);
  var spent = 0, finished = 0;
  Object.keys(trials).forEach(function(k) {
    var t = trials[k];
    if (t.started_at && t.finished_at && t.status !== 'PRUNED') {
      spent += num(t.finished_at) - num(t.started_at);
      finished++;
    }
  });
  var fit = run + running;
  if (!ended && limit > 0 && finished > 0 && spent > 0) {
    var more = Math.floor(Math.max(0, limit - elapsed) / (spent / finished)) * Math.max(1, running);
    fit += Math.min(open, more);
  }
  $('job-progress').textContent = ended ? String(run) : run + ' of about ' + fit;
  $('job-elapsed').textContent =
      elapsed.toFixed(0) + ' s' + (limit > 0 ? ' of ' + limit.toFixed(0) + ' s' : '');
  $('job-bar').value = ended ? 1 : (limit > 0 ? Math.min(1, elapsed / limit) : 0);
}

// " — settled: 1234 tokens/s, 95% interval 1200-1268" and the like: how
// sure the job is of its answer (docs/CLI.md, "Confirmations").
function certainty(job) {
  if (!job.best_certainty) return '';
  var text = ' — ' + job.best_certainty + ': ' + num(job.best_figure).toFixed(0) + ' tokens/s';
  if (num(job.best_interval_high) > num(job.best_interval_low)) {
    text += ', 95% interval ' + num(job.best_interval_low).toFixed(0) + '-' +
        num(job.best_interval_high).toFixed(0);
  }
  if ((job.best_tied_with || []).length) {
    text += '; a tie with ' + job.best_tied_with.join('; ') + ': the simplest answers';
  }
  return text;
}

// The answer's figure once the job has one (the mean of its kept
// measurements); before, the fastest single measurement.
var answerFigure = 0;
var standingOf = {};  // Trial.index -> its strategy's standing (the answer's rules)
function renderBest() {
  var best = 0;
  Object.keys(trials).forEach(function(k) {
    var t = trials[k];
    if (t.status === 'SUCCEEDED' && t.metrics)
      best = Math.max(best, num(t.metrics.tokens_per_second));
  });
  var shown = answerFigure > 0 ? answerFigure : best;
  $('job-best').textContent = shown > 0 ? shown.toFixed(0) : '-';
}

// A trial's strategy's figure, as the report's trial table writes it.
function standingText(st) {
  if (!st) return '-';
  var mark = st.answer ? ' answer' : '';
  if (num(st.measurements) > 1) {
    return num(st.figure).toFixed(0) + ' (' + num(st.interval_low).toFixed(0) + '-' +
        num(st.interval_high).toFixed(0) + ', ' + num(st.measurements) + 'x)' + mark;
  }
  return num(st.figure).toFixed(0) + ' (once)' + mark;
}

function trialRow(t) {
  var m = t.metrics || {};
  var ok = t.status === 'SUCCEEDED';
  var tr = el('tr');
  tr.setAttribute('data-trial', t.trial_id);
  tr.setAttribute('data-status', t.status || '');
  tr.appendChild(el('td', num(t.index), 'num'));
  var known = ['SUCCEEDED', 'OOM', 'FAILED', 'TIMEOUT', 'CANCELLED', 'RUNNING', 'PENDING'];
  tr.appendChild(el('td', t.status, known.indexOf(t.status) >= 0 ? 'st-' + t.status : 'st-other'));
  tr.appendChild(el('td', ok ? num(m.tokens_per_second).toFixed(0) : '-', 'num'));
  tr.appendChild(
      el('td',
         ok && num(m.step_time_spread) > 0 ?
             (100 * num(m.step_time_spread)).toFixed(0) + '%' + (m.noisy ? ' noisy' : '') :
             '-',
         'num'));
  tr.appendChild(el('td', standingText(standingOf[num(t.index)]), 'num'));
  tr.appendChild(el('td', ok ? (1000 * num(m.step_time_median_s)).toFixed(1) : '-', 'num'));
  tr.appendChild(
      el('td', ok && num(m.comm_time_s) > 0 ? (1000 * num(m.comm_time_s)).toFixed(1) : '-', 'num'));
  tr.appendChild(el('td', num(m.peak_memory_bytes) > 0 ? mib(m.peak_memory_bytes) : '-', 'num'));
  tr.appendChild(el('td', ok && num(m.mfu) > 0 ? (100 * num(m.mfu)).toFixed(1) + '%' : '-', 'num'));
  tr.appendChild(el('td', t.finished_at ? when(t.finished_at).slice(11, 19) : '-', 'num'));
  tr.appendChild(el('td', (t.worker_ids || []).join(', '), 'mono'));
  tr.appendChild(el('td', t.strategy ? t.strategy.text : '', 'mono'));
  tr.appendChild(el('td', t.reason || (t.confirms ? 'repeat of ' + t.confirms : ''), 'reason'));
  return tr;
}

function renderTrials() {
  var list = Object.keys(trials).map(function(k) {
    return trials[k];
  });
  list.sort(function(a, b) {
    return num(a.index) - num(b.index);
  });
  var tbody = document.querySelector('#trial-table tbody');
  // Rows are replaced in place, so the page keeps its scroll position.
  list.forEach(function(t, i) {
    var row = trialRow(t);
    if (i < tbody.rows.length) {
      if (tbody.rows[i].outerHTML !== row.outerHTML) tbody.replaceChild(row, tbody.rows[i]);
    } else {
      tbody.appendChild(row);
    }
  });
  while (tbody.rows.length > list.length) tbody.deleteRow(-1);
}

function pollJob() {
  var id = encodeURIComponent(jobId);
  return api('/api/job?id=' + id + '&since=' + version).then(function(ev) {
    if (ev.version === version) return null;
    // The figures are fetched before anything is drawn, so that the
    // table and the figures change together.
    return api('/api/job/figures?id=' + id, 'text').then(function(html) {
      version = ev.version;
      if (ev.job) renderJob(ev.job);
      (ev.trials || []).forEach(function(t) {
        trials[t.trial_id] = t;
      });
      renderTrials();
      renderBest();
      renderProgress();
      $('figures').innerHTML = html;
    });
  });
}

var timer = null;
function poll() {
  if (timer) {
    clearTimeout(timer);
    timer = null;
  }
  var work = [pollWorkers()];
  if (page === 'jobs') work.push(api('/api/jobs').then(renderJobs));
  if (page === 'job') work.push(pollJob());
  Promise.all(work).then(polled, showError).then(function() {
    if (!loginShown) timer = setTimeout(poll, POLL_MS);
  });
}

setupLogin();
if (page === 'job' && !jobId) {
  showError(new Error('no job given: open /job?id=JOB'));
  return;
}
poll();
})();
