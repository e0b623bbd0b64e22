// Drives the console in Debian's chromium (headless) through npm's playwright-core, for
// tests/it/console.rs: node console.mjs PRINTED_URL INVOICE_ID SCREENSHOT_DIR EVENT_ID. Prints one JSON object
// of what the page showed; the Rust test asserts on it and on the tables.
import { chromium } from 'playwright-core';

const [url, invoice, shots, event] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const seen = {};
try {
  const context = await browser.newContext({ viewport: { width: 1200, height: 860 } });
  const page = await context.newPage();
  page.on('pageerror', (e) => { seen.page_errors = [...(seen.page_errors || []), String(e)]; });
  // The printed URL logs in once: a cookie, then the page at the console's own address.
  await page.goto(url);
  seen.url_after_login = page.url();
  const cookie = (await context.cookies()).find((c) => c.name === 'paymos_console');
  seen.cookie = cookie && { value: cookie.value, httpOnly: cookie.httpOnly, sameSite: cookie.sameSite };
  seen.script_sees_cookie = await page.evaluate(() => document.cookie.includes('paymos_console'));
  const read = (path) => page.evaluate(async (p) => (await fetch(p)).json(), path);
  seen.api_home = await read('/api/home');
  seen.api_story = await read(`/api/search?id=${event}`);
  await page.waitForSelector('#home[data-loaded="true"]');
  await page.waitForSelector('#jobs[data-loaded="true"]');
  seen.counts = await page.$$eval('#groups .group', (gs) => Object.fromEntries(gs.map((g) => [g.dataset.kind, Number(g.dataset.count)])));
  seen.total = Number(await page.textContent('#total'));
  seen.health = await page.$$eval('#health [data-health]', (ds) => Object.fromEntries(ds.map((d) => [d.dataset.health, d.querySelector('dd').textContent])));
  seen.listed = await page.$$eval('#groups .item', (items) => items.map((i) => i.dataset.id));
  seen.banner_hidden = await page.$eval('#banner', (b) => b.hidden);
  seen.disabled_buttons = await page.$$eval('button[data-action]:disabled', (bs) => bs.length);
  await page.screenshot({ path: `${shots}/console-home.png`, fullPage: true });

  // Found by its invoice id, from the keyboard.
  await page.keyboard.press('/');
  await page.keyboard.type(invoice);
  await page.keyboard.press('Enter');
  await page.waitForSelector(`#timeline[data-id="${invoice}"] [data-action="release"]`);
  seen.story = await page.textContent('#timeline dl.facts');
  seen.steps = await page.textContent('#timeline ol.timeline');
  seen.facts = await page.textContent('#timeline ol.facts-published');

  // A release with a reason, no override: the domain refuses a payment that differs.
  await page.fill('#release-reason', 'customer confirmed the price change by email');
  await page.click('[data-action="release"]');
  await page.waitForSelector('#result[data-state="refused"]');
  seen.refusal = await page.textContent('#result');
  await page.waitForSelector('#timeline [data-action="override"]');
  await page.click('[data-action="override"]');
  await page.screenshot({ path: `${shots}/console-timeline.png` });

  // The override, a separate and explicit confirmation.
  await page.click('[data-action="confirm-override"]');
  await page.waitForSelector('#result[data-state="ok"]');
  seen.released = await page.textContent('#result');
  // The audit trail at the foot of the page: who released it, why, and what it changed.
  await page.waitForSelector('#audit tr[data-kind="release"]');
  seen.audit_row = await page.textContent('#audit tr[data-kind="release"]');
  await page.waitForFunction(() => !document.querySelector('#timeline [data-action="release"]'));
  seen.story_after = await page.textContent('#timeline dl.facts');

  // A second release (a second tab, a double click): the page's own session, the domain's answer.
  seen.second = await page.evaluate(async (id) => {
    const r = await fetch('/api/release', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id, reason: 'again', override_amount: true }),
    });
    return { status: r.status, body: await r.json() };
  }, invoice);
  // The same request from a browser that never visited the printed URL.
  const stranger = await (await browser.newContext()).newPage();
  await stranger.goto(new URL('/', url).href);
  seen.without_session = await stranger.evaluate(async (id) => {
    const r = await fetch('/api/release', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id, reason: 'forged', override_amount: true }),
    });
    return { status: r.status, body: await r.json() };
  }, invoice);

  // A bulk redrive: its count first; the first click only asks; nothing moves before the
  // confirmation of that count.
  await page.waitForSelector('#jobs [data-job="redrive"][data-count]');
  seen.redrive_offer = await page.textContent('#jobs [data-job="redrive"] p');
  await page.click('#jobs [data-action="redrive"]');
  seen.redrive_count_after_first_click = await page.evaluate(async () => (await (await fetch('/api/jobs')).json()).redrive.count);
  await page.click('#jobs [data-action="confirm-redrive"]');
  await page.waitForSelector('#result[data-state="ok"]');
  await page.waitForFunction(() => document.querySelector('#result').textContent.startsWith('redrive'));
  seen.redrive_result = await page.textContent('#result');

  // The released payment's order, found by its id: the invoice that claimed it, its guard.
  const order = `order-${invoice}`;
  await page.fill('#search-id', order);
  await page.keyboard.press('Enter');
  await page.waitForSelector(`#timeline[data-id="${order}"] .order`);
  seen.order_story = await page.textContent('#timeline .order');
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
