// The console's page: what waits (GET /api/home), one payment's story (GET /api/search), the
// command line's actions (POST /api/<action>, with the session's cookie; `events-resend` on a
// story) and the audit trail of
// them (GET /api/audit). Every text from
// the server is set as text, never as markup.
'use strict';

// Set when the identity may not write the state table: every action button is disabled (the
// server refuses them all the same), and the banner says what is missing.
const READ_ONLY = document.querySelector('meta[name="console-read-only"]').content;
const WRITE_UNKNOWN = document.querySelector('meta[name="console-write-unknown"]').content;
// What the person typed as a release's reason, kept across the page's re-renders.
let draftReason = '';
// The projects the stack applies (from /api/home): with several, a person names the payment's.
let stackProjects = [];
const LABELS = {
  held: 'Held: paid, but not as the order says', paid_late: 'Paid late', duplicate_payment: 'Duplicate payment',
  unconfirmed: 'Unconfirmed', order_unknown: 'Order unknown', project_unknown: 'Project unknown', order_conflict: 'Order conflict', unusable: 'Unusable', dead_letter: 'Dead letters',
  parked_handoff: 'Parked hand-off events',
};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) node.addEventListener(k.slice(2), v); else node.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  if (READ_ONLY && tag === 'button' && attrs && attrs['data-action']) {
    node.disabled = true;
    node.title = READ_ONLY;
  }
  return node;
}

function age(secs) {
  if (secs === null || secs === undefined) return '';
  if (secs < 120) return `${secs} s ago`;
  if (secs < 7200) return `${Math.floor(secs / 60)} min ago`;
  if (secs < 172800) return `${Math.floor(secs / 3600)} h ago`;
  return `${Math.floor(secs / 86400)} days ago`;
}

function when(ms) {
  return ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : '';
}

async function getJson(path) {
  const response = await fetch(path, { headers: { accept: 'application/json' } });
  return { status: response.status, body: await response.json() };
}

async function post(action, fields) {
  const response = await fetch(`/api/${action}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(fields),
  });
  return { status: response.status, body: await response.json() };
}

function say(state, text) {
  const result = document.getElementById('result');
  result.hidden = false;
  result.dataset.state = state;
  result.textContent = text;
}

function link(id) {
  return el('a', { href: `#${encodeURIComponent(id)}`, onclick: (e) => { e.preventDefault(); search(id); } }, id);
}

function itemOf(e) {
  const id = e.resource_id || e.event_id || '-';
  return el('li', { class: 'item', 'data-id': id },
    el('span', { class: 'id' }, id === '-' ? id : link(id)),
    el('span', { class: 'meta' }, [age(e.age_secs), e.project ? `project ${e.project}` : null].filter(Boolean).join(' · ')),
    el('span', { class: 'why' }, e.why),
    el('span', { class: 'do' }, 'Do: ', e.action));
}

function health(h) {
  const shown = (v) => (v === null || v === undefined ? 'not named' : (v.unavailable ? `unread: ${v.unavailable}` : v));
  const oldest = h.oldest_pending;
  const pairs = [
    ['work queue', shown(h.work_queue)],
    ['dead letters', shown(h.dead_letters)],
    ['oldest pending', oldest ? (oldest.unavailable ? `unread: ${oldest.unavailable}` : `${oldest.event_id} ${oldest.event_type}, ${age(oldest.age_secs)}`) : 'none'],
    ['last reconciliation', reconciled(h.reconciliation)],
  ];
  document.getElementById('health').replaceChildren(alarms(h.alarms), ...pairs.map(([k, v]) =>
    el('div', { 'data-health': k.replace(' ', '_') }, el('dt', {}, k), el('dd', {}, String(v)))));
}

// The stack's alarms: how many are in ALARM first and large, then each alarm with its state
// (ALARM, INSUFFICIENT_DATA, OK, as the server orders them); a failed read or "no alarms on
// dev" in their place.
function alarms(a) {
  const box = (text, inAlarm) => el('div', { 'data-health': 'alarms', 'data-in-alarm': inAlarm },
    el('dt', {}, 'alarms'), el('dd', {}, text));
  if (!a) return box('not read', null);
  if (a.unavailable) return box(`unread: ${a.unavailable}`, null);
  if (a.none) return box(a.none, null);
  const list = el('ul', { class: 'alarms' }, a.alarms.map((x) =>
    el('li', { 'data-state': x.state, title: x.reason || '' }, el('span', { class: 'state' }, x.state), ' ', x.name,
      x.since_ms ? el('time', {}, ` since ${when(x.since_ms)}`) : null)));
  const node = box(`${a.in_alarm} in ALARM of ${a.alarms.length}`, a.in_alarm);
  node.append(el('dd', { class: 'alarm-list' }, list));
  return node;
}

// Where the last clean scheduled reconciliation ended (the checkpoint it keeps), or never.
function reconciled(r) {
  if (!r) return 'not read';
  if (r.unavailable) return `unread: ${r.unavailable}`;
  if (!r.clean_until_ms) return 'never run clean';
  return `clean through ${when(r.clean_until_ms)} (${age(r.age_secs)})`;
}

async function loadHome() {
  const home = document.getElementById('home');
  const { status, body } = await getJson('/api/home');
  const groups = document.getElementById('groups');
  if (status !== 200) {
    groups.replaceChildren(el('p', { class: 'quiet' }, body.refused || `status ${status}`));
    return;
  }
  const about = body.about || {};
  stackProjects = about.projects || [];
  document.getElementById('about').textContent =
    `${about.stack || ''}${about.environment ? ` · ${about.environment}` : ''}${(about.projects || []).length ? ` · ${about.projects.join(', ')}` : ''}`;
  // Who the audit trail records: the credentials' identity on AWS, --actor on dev.
  document.getElementById('actor').textContent = about.identity || about.actor || '';
  health(body.header || {});
  document.getElementById('total').textContent = body.total;
  groups.replaceChildren(...body.groups.map((g) => el('section', { class: 'group', 'data-kind': g.kind, 'data-count': g.count },
    el('h3', {}, el('span', { class: 'count' }, g.count), LABELS[g.kind] || g.kind),
    g.items.length ? el('ul', {}, g.items.map(itemOf)) : null)));
  home.dataset.loaded = 'true';
}

const JOBS = {
  redrive: { id: 'work-queue', title: 'Dead letters', verb: 'Move them back' },
  'events-redrive': { id: 'webhook-queue', title: 'Parked hand-off events', verb: 'Move them back' },
  resend: { id: 'stranded', title: 'Stranded deliveries', verb: 'Send them again' },
};

// Each job shows its count first; nothing moves before a second, explicit confirmation of that
// count, and the server moves at most the count confirmed.
async function loadJobs() {
  const jobs = document.getElementById('jobs');
  const { status, body } = await getJson('/api/jobs');
  if (status !== 200) return;
  const rows = Object.entries(JOBS).map(([action, job]) => {
    const state = body[action] || {};
    if (state.unavailable) return el('div', { class: 'job quiet', 'data-job': action }, `${job.title}: ${state.unavailable}`);
    if (!state.count) return null;
    const confirmBox = el('div', { class: 'confirm-override', hidden: true },
      el('button', { type: 'button', class: 'danger', 'data-action': `confirm-${action}`, onclick: () => runJob(action, job.id, state.count) },
        `Yes, ${job.verb.toLowerCase()}: ${state.count}`));
    return el('div', { class: 'job panel', 'data-job': action, 'data-count': state.count },
      el('p', {}, el('strong', {}, `${job.title}: `), state.sentence),
      el('button', { type: 'button', 'data-action': action, onclick: () => { confirmBox.hidden = false; } }, `${job.verb}…`),
      confirmBox);
  }).filter(Boolean);
  jobs.replaceChildren(...rows);
  jobs.dataset.loaded = 'true';
  return body.running;
}

// The audit trail: who did what, when, why, and what it changed (newest first).
async function loadAudit() {
  const audit = document.getElementById('audit');
  const { status, body } = await getJson('/api/audit');
  const list = document.getElementById('audit-list');
  if (status !== 200) {
    list.replaceChildren(el('p', { class: 'quiet' }, `The audit trail could not be read: ${body.refused || status}`));
    return;
  }
  const rows = body.actions.map((a) => el('tr', { 'data-kind': a.kind },
    el('td', {}, when(a.at_ms)), el('td', {}, a.kind), el('td', {}, a.subject), el('td', {}, a.actor),
    el('td', {}, a.reason || ''), el('td', {}, a.result)));
  list.replaceChildren(rows.length === 0 ? el('p', { class: 'quiet' }, 'No action recorded yet.')
    : el('table', { class: 'audit' },
      el('thead', {}, el('tr', {}, ['when', 'action', 'of', 'by', 'reason', 'what it changed'].map((h) => el('th', {}, h)))),
      el('tbody', {}, rows)));
  audit.dataset.loaded = 'true';
}

// A job runs in the console's background: its start answers at once with the job's id, and
// the page reads it once a second ("moved N of M") until it ends, then says its result.
async function runJob(action, id, count) {
  quiet();
  const { status, body } = await post(action, { id, count });
  if (status !== 202) {
    await Promise.all([loadJobs(), loadHome(), loadAudit()]);
    say('refused', `${action} refused: ${body.refused || `status ${status}`}`);
    return;
  }
  await follow(body.job);
}

async function follow(job) {
  for (;;) {
    const { status, body } = await getJson(`/api/jobs/${job}`);
    if (status !== 200) {
      say('refused', `job ${job}: ${body.refused || `status ${status}`}`);
      return;
    }
    if (body.done) {
      await Promise.all([loadJobs(), loadHome(), loadAudit()]);
      if (body.error) say('refused', `${body.action} failed: ${body.error}`);
      else say('ok', `${body.action}: ${body.result}`);
      return;
    }
    say('running', `${body.action}: moved ${body.moved} of ${body.count}`);
    await new Promise((resolve) => { setTimeout(resolve, 1000); });
  }
}

function facts(pairs) {
  return el('dl', { class: 'facts' }, pairs.filter(([, v]) => v !== null && v !== undefined && v !== '')
    .flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, String(v))]));
}

function invoiceStory(story) {
  const inv = story.invoice;
  const parts = [];
  if (!inv) {
    parts.push(el('p', { class: 'quiet' }, 'No record of this invoice in the state table.'));
  } else {
    const order = inv.order || {};
    parts.push(facts([
      ['status', inv.status], ['standing', inv.standing], ['fulfilled', story.fulfilled ? 'yes' : 'no'],
      ['released by a person', inv.released ? 'yes' : null], ['order', order.id],
      ['amount (the invoice)', order.amount ? `${order.amount} ${order.currency || ''}` : null], ['project', order.project],
      ['paid at', when(inv.payment_at_ms)], ['duplicate of', inv.duplicate_of],
    ]));
  }
  parts.push(timeline(story.timeline), published(story.facts));
  if (story.waits.length) {
    parts.push(el('h3', {}, 'Waits for a person'), el('ul', { class: 'waits' }, story.waits.map(itemOf)));
  }
  parts.push(deliveries(story.deliveries));
  parts.push(actions(story));
  return parts;
}

// A withdrawal or a deposit: its record as the state table keeps it, then what of it waits.
function movementStory(story) {
  const r = story.record;
  const parts = [];
  if (!r) {
    parts.push(el('p', { class: 'quiet' }, `No record of this ${story.kind} in the state table.`));
  } else if (r.unexpected) {
    parts.push(el('p', { class: 'quiet' }, r.unexpected));
  } else if (story.kind === 'withdrawal') {
    parts.push(facts([
      ['status', r.status], ['type', r.type], ['amount', r.amount ? `${r.amount} ${r.currency || ''}` : null],
      ['changed', when(r.updated_at_ms)],
    ]));
    if (r.invoice_id) parts.push(el('p', {}, 'Refunds invoice ', link(r.invoice_id)));
  } else {
    parts.push(facts([
      ['status', r.status], ['credited', r.credited ? 'yes' : 'no'], ['net', r.net ? `${r.net} ${r.currency || ''}` : null],
      ['payer', r.payer], ['project', r.project], ['changed', when(r.updated_at_ms)],
    ]));
  }
  parts.push(timeline(story.timeline), published(story.facts));
  parts.push(deliveries(story.deliveries) || el('p', { class: 'quiet' }, 'Nothing of it waits.'));
  if (r && !r.unexpected) parts.push(el('h3', {}, 'Actions'), el('div', { class: 'panel actions' }, resendFacts(story.id)));
  return parts;
}

// `events resend --resource`: the resource's facts published again, with their keys (a
// consumer that deduplicates ships nothing twice).
function resendFacts(id) {
  return el('div', { class: 'row' },
    el('button', { type: 'button', 'data-action': 'events-resend', onclick: () => act('events-resend', { id }) }, 'Publish its facts again'));
}

// An order id, in each project the stack applies (or the one named): the invoice that claimed
// it, and the amount it was registered for. A stack of every project asks which project.
function orderStory(story) {
  const parts = story.orders.map((o) => {
    const c = o.claim;
    const g = o.registered;
    const before = c && c.before_projects ? ', before this stack kept each project\'s orders apart' : '';
    return el('div', { class: 'order', 'data-project': o.project || '' },
      story.orders.length > 1 || o.project ? el('h3', {}, `In project ${o.project}`)
        : (o.before_projects ? el('h3', {}, 'Before this stack kept each project\'s orders apart') : null),
      c ? el('p', {}, 'Fulfilled by invoice ', link(c.invoice_id), ` on ${when(c.paid_at_ms) || 'an unknown date'}${c.won_by ? ` (by ${c.won_by})` : ''}${before}`)
        : el('p', { class: 'quiet' }, 'No invoice fulfilled it.'),
      g ? el('p', {}, `Registered for ${g.amount || '?'} ${g.currency || ''}: a payment of another amount is held`)
        : el('p', { class: 'quiet' }, 'Not registered: no amount guard.'));
  });
  if (story.project_needed) {
    const project = el('input', { name: 'order-project', id: 'order-project', placeholder: 'prj_…' });
    parts.unshift(el('form', { class: 'panel ask-project', onsubmit: (e) => { e.preventDefault(); search(story.id, false, project.value); } },
      el('p', {}, story.project_needed), el('label', { for: 'order-project' }, 'its project'), project,
      el('button', { type: 'submit' }, 'Show it')));
  }
  if (story.waiting_invoices && story.waiting_invoices.length) {
    parts.push(el('h3', {}, 'Its invoices that wait for a person'), el('ul', { class: 'waiting-invoices' },
      story.waiting_invoices.map((w) => el('li', {}, link(w.invoice_id), `: ${w.standing}${w.project ? ` (project ${w.project})` : ''}`))));
  }
  parts.push(deliveries(story.deliveries));
  return parts;
}

// What happened to it, in Paymos' time: each status it reached and the delivery (or the
// person) that moved it there, and its refunds.
function timeline(steps) {
  if (!steps || !steps.length) return null;
  return [el('h3', {}, 'Timeline'), el('ol', { class: 'events timeline' }, steps.map((t) => {
    const d = t.delivery;
    const by = d ? `by ${d.event_id} (${d.environment || '?'}, secret ${d.secret_label}), received ${when(d.received_at_ms)}: ${d.outcome || d.state || 'not processed yet'}`
      : (t.by ? `by ${t.by}` : '');
    return el('li', { 'data-status': t.status || '' }, el('time', {}, when(t.at_ms) || 'time unknown'), `${t.what} `, el('span', { class: 'quiet' }, by));
  }))];
}

// The facts its records stand for, as the hand-off published them (and would again).
function published(facts) {
  if (!facts || !facts.length) return null;
  return [el('h3', {}, 'Facts published'), el('ol', { class: 'events facts-published' }, facts.map((f) =>
    el('li', {}, el('time', {}, when(f.committed_at_ms)), `${f.detail_type} `, el('span', { class: 'quiet' }, f.idempotency_key))))];
}

function deliveries(list) {
  if (!list || !list.length) return null;
  return [el('h3', {}, 'Deliveries that wait'), el('ol', { class: 'events' }, list.map((d) =>
    el('li', {}, el('time', {}, when(d.received_at_ms)),
      `${d.event_id} ${d.event_type} (${d.environment || '?'}, secret ${d.secret_label}): ${d.outcome}${d.reason ? ` because ${d.reason}` : ''}`)))];
}

// The buttons a story offers. The "Do:" lines name them where they are shown (do_line.rs):
// change both together.
function actions(story) {
  const id = story.id;
  const kinds = new Set((story.waits || []).map((w) => w.kind));
  const panel = el('div', { class: 'panel actions' });
  if (kinds.has('held') || kinds.has('paid_late') || kinds.has('after_refund')) {
    const reason = el('textarea', { name: 'reason', id: 'release-reason', rows: 2, required: true, placeholder: 'why this payment ships (kept on the invoice)',
      oninput: (e) => { draftReason = e.target.value; } });
    reason.value = draftReason;
    const confirmBox = el('div', { class: 'confirm-override', hidden: true },
      el('p', {}, `Fulfil ${id} although its payment differs from the registered order's amount? This is kept on the invoice as amount_overridden.`),
      el('button', { type: 'button', class: 'danger', 'data-action': 'confirm-override', onclick: () => release(id, reason.value, true, releaseProject) }, 'Yes, override the amount and release'));
    // A stack of several projects: the project a person checked at Paymos (required where the
    // invoice's events named two).
    const releaseProject = stackProjects.length > 1
      ? el('select', { name: 'release-project', id: 'release-project' }, el('option', { value: '' }, "(the record's)"),
        ...stackProjects.map((p) => el('option', { value: p }, p)))
      : null;
    panel.append(el('label', { for: 'release-reason' }, 'Release: fulfil on your word (a reason is required)'), reason,
      ...(releaseProject ? [el('label', { for: 'release-project' }, 'of project'), releaseProject] : []),
      el('div', { class: 'row' },
        el('button', { type: 'button', class: 'primary', 'data-action': 'release', onclick: () => release(id, reason.value, false, releaseProject) }, 'Release'),
        kinds.has('held') ? el('button', { type: 'button', 'data-action': 'override', onclick: () => { confirmBox.hidden = false; } }, 'Override the amount…') : null),
      confirmBox);
  }
  if (id.startsWith('inv_') && !story.fulfilled) {
    const order = el('input', { name: 'order_id', id: 'mark-order', placeholder: 'order id' });
    // A stack of several projects: the record's project, else the one a person names (an
    // order id means something only within its project).
    const known = ((story.invoice || {}).order || {}).project;
    const project = stackProjects.length > 1 && !known
      ? el('select', { name: 'project', id: 'mark-project' }, el('option', { value: '' }, 'its project…'),
        ...stackProjects.map((p) => el('option', { value: p }, p)))
      : null;
    panel.append(el('label', { for: 'mark-order' }, 'Mark paid (as support does), naming its order'), order,
      ...(project ? [el('label', { for: 'mark-project' }, 'of project'), project] : []),
      el('button', { type: 'button', 'data-action': 'mark-paid', onclick: () => act('mark-paid', { id, order_id: order.value, project: project ? project.value : undefined }) }, 'Mark paid'));
  }
  // What waits for Paymos' word, of an invoice, a withdrawal or a deposit.
  const onPaymosWord = (k) => k === 'unconfirmed' || k === 'project_unknown';
  if ([...kinds].some(onPaymosWord) || (story.deliveries || []).some((d) => onPaymosWord(d.outcome))) {
    panel.append(el('div', { class: 'row' }, el('button', { type: 'button', 'data-action': 'recheck', onclick: () => act('recheck', { id }) }, 'Recheck with Paymos')));
  }
  // What only a person's own act settles (an order conflict; an unusable delivery applied by
  // hand): once settled, say how, and it leaves the list.
  for (const w of (story.waits || []).filter((w) => ['order_conflict', 'unusable', 'unconfirmed'].includes(w.kind) && w.event_id)) {
    const how = el('textarea', { name: 'resolve-reason', id: `resolve-${w.event_id}`, rows: 2, required: true, placeholder: 'how you settled it (kept in the audit trail)' });
    panel.append(el('label', { for: `resolve-${w.event_id}` }, `Resolve ${w.event_id} (${w.kind}): settled by hand`), how,
      el('div', { class: 'row' }, el('button', { type: 'button', 'data-action': 'resolve', onclick: () => act('resolve', { id: w.event_id, reason: how.value }) }, 'Resolved')));
  }
  if (story.invoice) panel.append(resendFacts(id));
  return panel.childNodes.length ? [el('h3', {}, 'Actions'), panel] : null;
}

async function release(id, reason, overrideAmount, project) {
  await act('release', { id, reason, override_amount: overrideAmount, project: project && project.value ? project.value : undefined });
}

function quiet() {
  const result = document.getElementById('result');
  result.hidden = true;
  delete result.dataset.state;
}

// The page is read again before the answer is said, so what the answer shows is what is now.
async function act(action, fields) {
  quiet();
  const { status, body } = await post(action, fields);
  await Promise.all([loadHome(), search(fields.id, true), loadAudit()]);
  if (status === 200 && body.published) {
    say('ok', `${action} ${body.id}: published ${body.count} again, with their keys: ${body.published.map((e) => `${e.detail_type} ${e.idempotency_key}`).join(', ') || 'no fact of it yet'}`);
  } else if (status === 200 && body.outcome === 'already_final') {
    say('unchanged', `${action} ${body.id}: already_final (nothing changed: it was fulfilled before)`);
  } else if (status === 200) {
    say('ok', `${action} ${body.id}: ${body.outcome || (body.rechecked || []).map((r) => `${r.event_id} ${r.outcome}`).join(', ') || 'nothing to re-check'}`);
  } else {
    say('refused', `${action} refused: ${body.refused || `status ${status}`}`);
  }
}

async function search(id, keepResult, project) {
  id = (id || '').trim();
  if (!id) return;
  project = (project || '').trim();
  document.getElementById('search-id').value = id;
  if (!keepResult) document.getElementById('result').hidden = true;
  const timeline = document.getElementById('timeline');
  const { status, body } = await getJson(`/api/search?id=${encodeURIComponent(id)}${project ? `&project=${encodeURIComponent(project)}` : ''}`);
  const parts = [el('h2', {}, id, ' ', el('span', { class: 'count' }, body.kind || ''), project ? el('span', { class: 'quiet' }, ` in ${project}`) : null)];
  if (status !== 200) {
    parts.push(el('p', {}, body.refused || `status ${status}`));
  } else if (body.kind === 'invoice') {
    parts.push(...invoiceStory(body));
  } else if (body.kind === 'event') {
    for (const d of body.deliveries_of_id) {
      parts.push(facts([['environment', d.environment], ['secret', d.secret_label], ['type', d.event_type],
        ['received', when(d.received_at_ms)], ['state', d.state], ['outcome', d.outcome], ['why', d.reason],
        ['processed', when(d.processed_at_ms)], ['resource', d.resource_id]]),
        el('h3', {}, 'Body as kept (personal data redacted)'), el('pre', { class: 'body' }, JSON.stringify(d.body, null, 2)));
    }
    if (!body.deliveries_of_id.length) parts.push(el('p', { class: 'quiet' }, 'No delivery with this id in the deliveries table.'));
    if (body.invoice) parts.push(el('h3', {}, `Invoice ${body.invoice.id}`), ...invoiceStory(body.invoice));
  } else if (body.kind === 'withdrawal' || body.kind === 'deposit') {
    parts.push(movementStory(body));
  } else if (body.kind === 'order') {
    parts.push(orderStory(body));
  } else {
    parts.push(deliveries(body.deliveries) || el('p', { class: 'quiet' }, 'Nothing of it waits.'));
  }
  if (body.not_read && body.not_read.length) {
    parts.push(el('h3', {}, 'Not shown yet'), el('ul', { class: 'quiet' }, body.not_read.map((n) => el('li', {}, n))));
  }
  timeline.replaceChildren(...parts.flat().filter(Boolean));
  timeline.hidden = false;
  timeline.dataset.id = id;
  history.replaceState(null, '', `#${encodeURIComponent(id)}`);
}

document.getElementById('search').addEventListener('submit', (e) => {
  e.preventDefault();
  search(document.getElementById('search-id').value);
});
document.addEventListener('keydown', (e) => {
  if (e.key === '/' && !['INPUT', 'TEXTAREA'].includes(document.activeElement.tagName)) {
    e.preventDefault();
    document.getElementById('search-id').focus();
  }
});
const banner = document.getElementById('banner');
if (READ_ONLY || WRITE_UNKNOWN) {
  banner.hidden = false;
  banner.dataset.state = READ_ONLY ? 'read-only' : 'unknown';
  banner.textContent = READ_ONLY || WRITE_UNKNOWN;
}
loadJobs().then((running) => { if (running) follow(running.job); });
loadHome();
loadAudit();
if (location.hash.length > 1) search(decodeURIComponent(location.hash.slice(1)));
