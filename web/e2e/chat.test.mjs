// Chat in the meeting (issue 17), in Chromium against a real node: two
// members write to each other from the keyboard, see each other's lines
// in the order they were written, the text stays text, and a page that
// reloads gets the conversation back. In a meeting the chat and the
// whiteboard travel over the "conversation" data channel of each page's
// publisher connection, not the conversation WebSocket: the pages say so
// (data-transport) and the node's metrics count the channels. The
// pointer and the shared notes travel the same way.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { joinThroughUI, launch, metric, startNode, waitFor } from './harness.mjs';

let node, browser;
before(async () => {
  node = await startNode();
  browser = await launch();
});
after(async () => {
  await browser?.close();
  node?.stop();
});

async function link(sid, role) {
  const t = await node.api('POST', `/sessions/${sid}/tokens`, { role });
  return `${node.url}/join/${sid}#t=${encodeURIComponent(t.token)}`;
}

const lines = (page) =>
  page.getByRole('log', { name: 'Chat messages' }).getByTestId('chat-line').evaluateAll((ls) =>
    ls.map((l) => `${l.querySelector('.chat-from').textContent}: ${l.querySelector('.chat-text').textContent}`),
  );

// overDataChannel waits until each page's chat travels over its data
// channel and the node has exactly those open, and no conversation
// WebSocket.
async function overDataChannel(...pages) {
  for (const p of pages) {
    await waitFor(async () => (await p.locator('section.chat').getAttribute('data-transport')) === 'datachannel', 15_000, 'the chat on the data channel');
  }
  await waitFor(async () => (await metric(node, 'convene_webrtc_data_channels')) === pages.length, 10_000, `${pages.length} conversation data channels on the node`);
  await waitFor(async () => (await metric(node, 'convene_chat_sockets')) === pages.length, 10_000, 'no conversation WebSocket left open');
}

async function say(page, text) {
  const box = page.getByRole('textbox', { name: 'Message', exact: true });
  await box.click();
  await box.fill(text);
  await box.press('Enter');
  await waitFor(async () => (await box.inputValue()) === '', 5000, 'the message box to empty after sending');
}

test('two members chat; the order holds, text stays text, a reload keeps the conversation', { timeout: 90_000 }, async () => {
  const s = await node.api('POST', '/sessions', { name: 'chat' });
  const ada = await joinThroughUI(await browser.newContext(), await link(s.id, 'chair'), 'Ada');
  const bob = await joinThroughUI(await browser.newContext(), await link(s.id, 'participant'), 'Bob');
  await waitFor(async () => (await bob.getByRole('textbox', { name: 'Message', exact: true }).getAttribute('placeholder')) === 'Write a message', 15_000, "Bob's chat to connect");
  await waitFor(async () => (await ada.getByRole('textbox', { name: 'Message', exact: true }).getAttribute('placeholder')) === 'Write a message', 15_000, "Ada's chat to connect");

  await overDataChannel(ada, bob);
  const opened = await metric(node, 'convene_webrtc_data_channels_opened_total');

  await say(ada, 'Hello Bob');
  await say(ada, 'Can you hear me?');
  await waitFor(async () => (await lines(bob)).length === 2, 10_000, "Ada's two lines on Bob's page");
  assert.deepEqual(await lines(bob), ['Ada: Hello Bob', 'Ada: Can you hear me?']);
  await say(bob, 'Yes — <b>loud</b> and clear');
  await waitFor(async () => (await lines(ada)).length === 3, 10_000, "Bob's reply on Ada's page");
  assert.deepEqual(await lines(ada), ['You: Hello Bob', 'You: Can you hear me?', 'Bob: Yes — <b>loud</b> and clear']);
  assert.equal(await ada.locator('.chat-text b').count(), 0, 'what a member types is never HTML');

  // Bob reloads: the conversation comes back, and he goes on from there.
  await bob.reload();
  await waitFor(async () => (await lines(bob)).length === 3, 15_000, 'the history after a reload');
  assert.deepEqual(await lines(bob), ['Ada: Hello Bob', 'Ada: Can you hear me?', 'You: Yes — <b>loud</b> and clear']);
  await overDataChannel(ada, bob);
  assert.ok((await metric(node, 'convene_webrtc_data_channels_opened_total')) > opened, "Bob's reloaded page opened a new channel");
  assert.deepEqual(await lines(bob), ['Ada: Hello Bob', 'Ada: Can you hear me?', 'You: Yes — <b>loud</b> and clear'], 'the move to the channel repeats nothing');
  await say(bob, 'Back again');
  await waitFor(async () => (await lines(ada)).length === 4, 10_000, "Bob's line after his reload on Ada's page");
  assert.equal((await lines(ada))[3], 'Bob: Back again');
  // The node kept them all, in order.
  assert.equal((await node.api('GET', `/sessions/${s.id}`)).state, 'activated');
  await ada.context().close();
  await bob.context().close();
});

test('the whiteboard: one member draws, the other sees it; with the chalkboard style only the holder draws', { timeout: 90_000 }, async () => {
  const s = await node.api('POST', '/sessions', { name: 'board' });
  const ada = await joinThroughUI(await browser.newContext(), await link(s.id, 'chair'), 'Ada');
  const bob = await joinThroughUI(await browser.newContext(), await link(s.id, 'participant'), 'Bob');
  for (const p of [ada, bob]) {
    await waitFor(async () => (await p.getByRole('textbox', { name: 'Message', exact: true }).getAttribute('placeholder')) === 'Write a message', 15_000, 'chat to connect');
    await p.getByRole('button', { name: 'Show the whiteboard' }).click();
  }
  await overDataChannel(ada, bob);
  const inked = (page) =>
    page.getByTestId('whiteboard').evaluate((c) => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
      return n;
    });
  const stroke = async (page, x0, y0, x1, y1) => {
    const box = await page.getByTestId('whiteboard').boundingBox();
    await page.mouse.move(box.x + box.width * x0, box.y + box.height * y0);
    await page.mouse.down();
    for (let i = 1; i <= 10; i++) await page.mouse.move(box.x + box.width * (x0 + ((x1 - x0) * i) / 10), box.y + box.height * (y0 + ((y1 - y0) * i) / 10));
    await page.mouse.up();
  };
  await stroke(ada, 0.1, 0.1, 0.9, 0.9);
  await waitFor(async () => (await inked(bob)) > 500, 10_000, "Ada's stroke on Bob's board");
  assert.match(await bob.getByTestId('whiteboard').getAttribute('aria-label'), /by Ada/);

  // The chair gives the whiteboard the chalkboard style: Bob, who holds no
  // token, may not draw; Ada takes the floor and clears the board.
  await node.api('PUT', `/sessions/${s.id}/floors/data`, { style: 'chalkboard', auto: true });
  await waitFor(async () => (await bob.getByText("Only the whiteboard floor's holder draws now.").count()) === 1, 10_000, 'Bob told he may not draw');
  const before = await inked(ada);
  await stroke(bob, 0.9, 0.1, 0.1, 0.9);
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(await inked(ada), before, "Bob's stroke must not reach Ada's board");
  await ada.getByRole('button', { name: 'Request whiteboard floor' }).click();
  await ada.getByText('You have the whiteboard floor.').waitFor({ timeout: 10_000 });
  await ada.getByRole('button', { name: 'Clear the board' }).click();
  await waitFor(async () => (await inked(bob)) === 0, 10_000, "Ada's clear on Bob's board");
  await stroke(ada, 0.2, 0.5, 0.8, 0.5);
  await waitFor(async () => (await inked(bob)) > 200, 10_000, "Ada's stroke as the floor's holder on Bob's board");
  await ada.context().close();
  await bob.context().close();
});

test("the pointer and the shared notes: Bob sees where Ada points; the notes converge and a reload shows them", { timeout: 90_000 }, async () => {
  const s = await node.api('POST', '/sessions', { name: 'notes' });
  const ada = await joinThroughUI(await browser.newContext(), await link(s.id, 'chair'), 'Ada');
  const bob = await joinThroughUI(await browser.newContext(), await link(s.id, 'participant'), 'Bob');
  const connected = (p) =>
    waitFor(async () => (await p.getByRole('textbox', { name: 'Message', exact: true }).getAttribute('placeholder')) === 'Write a message', 15_000, 'chat to connect');
  for (const p of [ada, bob]) {
    await connected(p);
    await p.getByRole('button', { name: 'Show the whiteboard' }).click();
  }
  await overDataChannel(ada, bob);

  // Ada's pointer crosses the board: Bob sees a dot with her name where it stopped.
  const box = await ada.getByTestId('whiteboard').boundingBox();
  for (let i = 0; i <= 10; i++) await ada.mouse.move(box.x + box.width * (0.2 + 0.05 * i), box.y + box.height * 0.5);
  const pointer = bob.getByTestId('pointer');
  await waitFor(async () => (await pointer.count()) === 1, 10_000, "Ada's pointer on Bob's board");
  assert.equal((await pointer.textContent()).trim(), 'Ada');
  await waitFor(
    async () => {
      const [x, y] = await pointer.evaluate((e) => [parseFloat(e.style.left), parseFloat(e.style.top)]);
      return Math.abs(x - 70) < 2 && Math.abs(y - 50) < 2;
    },
    10_000,
    "Ada's pointer where she stopped (70 %, 50 %)",
  );
  assert.equal(await ada.getByTestId('pointer').count(), 0, 'Ada does not see her own pointer');
  // Her pointer leaves the board: it goes from Bob's.
  await ada.mouse.move(box.x + box.width / 2, Math.max(0, box.y - 40));
  await waitFor(async () => (await pointer.count()) === 0, 10_000, "Ada's pointer gone from Bob's board");

  // The notes: Ada writes, Bob sees it; Bob edits, Ada converges.
  const notes = (p) => p.getByRole('textbox', { name: 'Shared notes' });
  const status = (p) => p.getByTestId('notes-status').textContent();
  await notes(ada).fill('Agenda: budget');
  await waitFor(async () => (await notes(bob).inputValue()) === 'Agenda: budget', 10_000, "Ada's notes on Bob's page");
  await notes(bob).fill('Agenda: budget, hiring');
  await waitFor(async () => (await notes(ada).inputValue()) === 'Agenda: budget, hiring', 10_000, "Bob's edit on Ada's page");
  if (process.env.SCREENSHOT_CHAT) {
    // The README's picture: Bob's page with a line of chat, a stroke, the
    // notes and Ada's pointer.
    await ada.getByRole('textbox', { name: 'Message', exact: true }).fill('The agenda is in the notes');
    await ada.getByRole('button', { name: 'Send' }).click();
    await waitFor(async () => (await bob.getByText('The agenda is in the notes').count()) === 1, 10_000, "Ada's line on Bob's page");
    await ada.mouse.move(box.x + box.width * 0.15, box.y + box.height * 0.25);
    await ada.mouse.down();
    for (let i = 1; i <= 10; i++) await ada.mouse.move(box.x + box.width * (0.15 + 0.03 * i), box.y + box.height * (0.25 + 0.02 * i));
    await ada.mouse.up();
    await ada.mouse.move(box.x + box.width * 0.4, box.y + box.height * 0.4);
    await waitFor(async () => (await pointer.count()) === 1, 10_000, "Ada's pointer back on Bob's board");
    await bob.screenshot({ path: process.env.SCREENSHOT_CHAT });
  }
  await waitFor(async () => (await status(ada)).includes('Last edited by Bob'), 5000, "Ada's status naming Bob");

  // Bob reloads: the hello's history gives him the current notes.
  await bob.reload();
  await connected(bob);
  await waitFor(async () => (await notes(bob).inputValue()) === 'Agenda: budget, hiring', 15_000, 'the notes after a reload');
  // The hello left Ada's pointer positions out, and counted them: nothing
  // is reported missing, and Ada's chat after the reload reaches Bob.
  await say(ada, 'After the pointer');
  await waitFor(async () => (await lines(bob)).includes('Ada: After the pointer'), 10_000, "Ada's line after Bob's reload");
  for (const p of [ada, bob]) assert.equal(await p.locator('.chat-missing').count(), 0, 'no message reported missing');

  // Notes over the cap are refused in the page, said in the status line;
  // the others keep the last shared version.
  await notes(ada).fill('x'.repeat(20_000));
  await waitFor(async () => (await status(ada)).includes('too long'), 5000, 'the refusal in the status line');
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(await notes(bob).inputValue(), 'Agenda: budget, hiring');
  assert.equal(await notes(ada).inputValue(), 'x'.repeat(20_000), "Ada's text stays for her to shorten");
  await ada.context().close();
  await bob.context().close();
});
