// The official openai npm package against a running puremetal serve, at
// PUREMETAL_URL (http://host:port): /v1/models, chat completions and text
// completions, whole and streamed, each response's shape checked, and at
// temperature 0 the streamed text equal to the whole one. Exits nonzero on
// the first failure.
import assert from "node:assert/strict";
import OpenAI from "openai";

const base = process.env.PUREMETAL_URL;
assert.ok(base, "PUREMETAL_URL is not set");
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });

function checkUsage(usage, what) {
  assert.ok(usage, `${what}: no usage`);
  for (const k of ["prompt_tokens", "completion_tokens", "total_tokens"]) {
    assert.ok(Number.isInteger(usage[k]) && usage[k] >= 0, `${what}: usage.${k} = ${usage[k]}`);
  }
  assert.ok(usage.prompt_tokens > 0 && usage.completion_tokens > 0, `${what}: usage ${JSON.stringify(usage)}`);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens, `${what}: total_tokens`);
}

function checkFinish(reason, what) {
  assert.ok(reason === "stop" || reason === "length", `${what}: finish_reason ${reason}`);
}

const models = await client.models.list();
assert.equal(models.data.length, 1, "one model listed");
const model = models.data[0].id;
assert.equal(models.data[0].object, "model");
assert.equal(typeof model, "string");
console.log(`model: ${model}`);

const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Say hello." },
];
const chatParams = { model, messages, max_tokens: 8, temperature: 0 };

const chat = await client.chat.completions.create(chatParams);
assert.equal(chat.object, "chat.completion");
assert.ok(chat.id.startsWith("chatcmpl-"), `chat id ${chat.id}`);
assert.equal(chat.model, model);
assert.ok(Number.isInteger(chat.created));
assert.equal(chat.choices.length, 1);
assert.equal(chat.choices[0].index, 0);
assert.equal(chat.choices[0].message.role, "assistant");
assert.equal(typeof chat.choices[0].message.content, "string");
checkFinish(chat.choices[0].finish_reason, "chat");
checkUsage(chat.usage, "chat");
console.log(`chat: ${JSON.stringify(chat.choices[0].message.content)} (${chat.choices[0].finish_reason}, ${chat.usage.completion_tokens} tokens)`);

const chatStream = await client.chat.completions.create({ ...chatParams, stream: true, stream_options: { include_usage: true } });
let streamed = "";
let chunks = 0;
let role = "";
let finish = null;
let streamUsage = null;
for await (const chunk of chatStream) {
  assert.equal(chunk.object, "chat.completion.chunk");
  assert.equal(chunk.model, model);
  chunks++;
  if (chunk.choices.length === 0) {
    streamUsage = chunk.usage;
    continue;
  }
  const delta = chunk.choices[0].delta;
  if (delta.role) role = delta.role;
  if (delta.content) streamed += delta.content;
  if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
}
assert.equal(role, "assistant", "the stream names the role");
assert.equal(streamed, chat.choices[0].message.content, "streamed chat text equals the whole one at temperature 0");
assert.equal(finish, chat.choices[0].finish_reason, "streamed chat finish_reason");
assert.deepEqual(streamUsage, chat.usage, "streamed chat usage");
console.log(`streamed chat: ${chunks} chunks, the same text, finish_reason and usage`);

const completionParams = { model, prompt: "Once upon a time", max_tokens: 8, temperature: 0 };
const completion = await client.completions.create(completionParams);
assert.equal(completion.object, "text_completion");
assert.ok(completion.id.startsWith("cmpl-"), `completion id ${completion.id}`);
assert.equal(completion.choices.length, 1);
assert.equal(typeof completion.choices[0].text, "string");
checkFinish(completion.choices[0].finish_reason, "completion");
checkUsage(completion.usage, "completion");
console.log(`completion: ${JSON.stringify(completion.choices[0].text)} (${completion.choices[0].finish_reason}, ${completion.usage.completion_tokens} tokens)`);

const completionStream = await client.completions.create({ ...completionParams, stream: true });
let text = "";
let textFinish = null;
for await (const chunk of completionStream) {
  assert.equal(chunk.object, "text_completion");
  text += chunk.choices[0].text;
  if (chunk.choices[0].finish_reason) textFinish = chunk.choices[0].finish_reason;
}
assert.equal(text, completion.choices[0].text, "streamed completion text equals the whole one at temperature 0");
assert.equal(textFinish, completion.choices[0].finish_reason, "streamed completion finish_reason");
console.log("streamed completion: the same text and finish_reason");

await assert.rejects(
  client.chat.completions.create({ ...chatParams, model: "no-such-model" }),
  (err) => err instanceof OpenAI.NotFoundError && err.status === 404 && err.code === "model_not_found",
  "an unknown model is a 404 model_not_found",
);
await assert.rejects(
  client.chat.completions.create({ ...chatParams, n: 2 }),
  (err) => err instanceof OpenAI.BadRequestError && err.status === 400 && err.param === "n",
  "n = 2 is a 400 about n",
);
console.log("errors: unknown model 404, n = 2 400");
console.log("openai-node: all checks passed");
