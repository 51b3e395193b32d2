// Chat in the meeting (issue 17), in Chromium against a real node: two
// members write to each other from the keyboard, see each other's lines
// in the order they were written, the text stays text, and a page that
// reloads gets the conversation back.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { joinThroughUI, launch, startNode, waitFor } from './harness.mjs';

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
  await say(bob, 'Back again');
  await waitFor(async () => (await lines(ada)).length === 4, 10_000, "Bob's line after his reload on Ada's page");
  assert.equal((await lines(ada))[3], 'Bob: Back again');
  // The node kept them all, in order.
  assert.equal((await node.api('GET', `/sessions/${s.id}`)).state, 'activated');
});
