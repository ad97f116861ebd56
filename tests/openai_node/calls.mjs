// Real calls of the official OpenAI Node.js client against a live `pagoda serve --http-port`
// (run by tests/openai_node_test.py, which installs the client). Every check prints one line;
// the exit status is the number of failed checks.
import OpenAI from 'openai';

import {baseURL, check, client, expectError, finish, limitedKey, model, post} from './common.mjs';

// Reads a stream as llama.cpp's tests and hand-written loops do: text until a chunk
// carries finish_reason, then stop reading.
async function readUntilFinish(stream, piece) {
  let text = '';
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (choice === undefined) continue;
    text += piece(choice) ?? '';
    if (choice.finish_reason) return {text, reason: choice.finish_reason};
  }
  return {text, reason: null};
}

const ids = [];
for await (const m of client.models.list()) ids.push(m.id);
check(ids.length === 1 && ids[0] === model, `models.list: ${JSON.stringify(ids)}`);

// Completions: whole, then streamed and read until finish_reason: the same text.
const prompt = 'Once upon a time';
const greedy = {model, prompt, max_tokens: 16, temperature: 0};
const full = await client.completions.create(greedy);
check(full.object === 'text_completion' && full.choices.length === 1 &&
          full.choices[0].finish_reason === 'length' && full.usage.completion_tokens === 16 &&
          full.usage.prompt_tokens === 5,
      `completions: ${JSON.stringify(full.choices[0])} ${JSON.stringify(full.usage)}`);
const streamed = await readUntilFinish(
    await client.completions.create({...greedy, stream: true}), (c) => c.text);
check(streamed.text === full.choices[0].text && streamed.reason === 'length',
      `completions streamed until finish_reason: ${JSON.stringify(streamed)}`);

// Chat: the same both ways.
const messages = [{role: 'user', content: 'Tell me a story.'}];
const chat = await client.chat.completions.create(
    {model, messages, max_tokens: 12, temperature: 0});
check(chat.object === 'chat.completion' && chat.choices[0].message.role === 'assistant' &&
          chat.choices[0].finish_reason === 'length' && chat.usage.completion_tokens === 12,
      `chat: ${JSON.stringify(chat.choices[0])}`);
const chatStreamed = await readUntilFinish(
    await client.chat.completions.create(
        {model, messages, max_tokens: 12, temperature: 0, stream: true}),
    (c) => c.delta?.content);
check(chatStreamed.text === chat.choices[0].message.content && chatStreamed.reason === 'length',
      `chat streamed until finish_reason: ${JSON.stringify(chatStreamed)}`);

// n = 2 with a seed: two choices, indexed.
const two = await client.completions.create(
    {model, prompt, max_tokens: 8, temperature: 1, seed: 7, n: 2});
check(two.choices.length === 2 && two.choices[0].index === 0 && two.choices[1].index === 1,
      `n = 2: ${two.choices.map((c) => c.index)}`);

// logprobs: completions (k = 2) and chat (top_logprobs = 2), one entry per token.
const lp = await client.completions.create({...greedy, logprobs: 2});
const l = lp.choices[0].logprobs;
check(l !== null && l !== undefined && l.tokens.length === 16 && l.token_logprobs.length === 16 &&
          l.token_logprobs.every((x) => typeof x === 'number' && x <= 0) &&
          l.top_logprobs.every((t) => Object.keys(t).length >= 2 && Object.keys(t).length <= 3) &&
          l.tokens.join('') === lp.choices[0].text && lp.choices[0].text === full.choices[0].text,
      `completions logprobs: ${JSON.stringify(l?.tokens)}`);
const clp = await client.chat.completions.create(
    {model, messages, max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 2});
const content = clp.choices[0].logprobs?.content ?? [];
check(content.length === 12 &&
          content.every((t) => typeof t.token === 'string' && t.logprob <= 0 &&
                               Array.isArray(t.bytes) && t.top_logprobs.length === 2) &&
          content.map((t) => t.token).join('') === clp.choices[0].message.content,
      `chat logprobs: ${JSON.stringify(content.map((t) => t.token))}`);

// logit_bias: +100 on one token makes every token that one.
const forced = await client.completions.create(
    {model, prompt, max_tokens: 4, temperature: 0, logit_bias: {'400': 100}});
const expected = await post('/detokenize', {tokens: [400, 400, 400, 400]});
// (detokenizing strips the SentencePiece space that a completion keeps.)
check(forced.choices[0].text.replace(/^ /, '') === expected.content && expected.content !== '',
      `logit_bias forces token 400: ${JSON.stringify(forced.choices[0].text)} vs ${
          JSON.stringify(expected.content)}`);

// echo for evaluation (lm-evaluation-harness's loglikelihood request): the prompt's own
// logprobs, the first null, and no completion.
const echo = await client.completions.create(
    {model, prompt, echo: true, logprobs: 1, max_tokens: 0, temperature: 0});
const el = echo.choices[0].logprobs;
check(echo.choices[0].text === prompt && echo.usage.completion_tokens === 0 &&
          el?.tokens.length === echo.usage.prompt_tokens && el.token_logprobs[0] === null &&
          el.token_logprobs.slice(1).every((x) => typeof x === 'number' && x <= 0),
      `echo with logprobs and max_tokens 0: ${JSON.stringify(el?.token_logprobs)}`);

// Errors, by class.
await expectError(OpenAI.BadRequestError, 400, 'temperature 3',
                  () => client.completions.create({...greedy, temperature: 3}));
await expectError(OpenAI.BadRequestError, 400, 'past the context',
                  () => client.completions.create({...greedy, max_tokens: 100000}),
                  (e) => e.code === 'context_length_exceeded');
await expectError(OpenAI.NotFoundError, 404, 'unknown model',
                  () => client.completions.create({...greedy, model: 'gpt-x'}));
const wrong = new OpenAI({baseURL, apiKey: 'wrong', maxRetries: 0});
await expectError(OpenAI.AuthenticationError, 401, 'wrong key',
                  () => wrong.completions.create(greedy));
const limited = new OpenAI({baseURL, apiKey: limitedKey, maxRetries: 0});
const first = await limited.completions.create(greedy);  // 21 of the bucket's 30
check(first.usage.completion_tokens === 16, 'rate-limited tenant: first request served');
await expectError(OpenAI.RateLimitError, 429, 'rate-limited tenant: second request',
                  () => limited.completions.create(greedy));

// Abort a stream mid-way; the server goes on serving.
const controller = new AbortController();
const long = await client.completions.create(
    {...greedy, max_tokens: 200, ignore_eos: true, stream: true}, {signal: controller.signal});
let chunks = 0;
let aborted = false;
try {
  for await (const chunk of long) {
    if (++chunks === 2) {
      controller.abort();
      // Leave the loop ourselves: when the whole body has already arrived (a fast server,
      // a slow client), this client's iterator can stay pending after the abort with nothing
      // keeping Node's event loop alive, and Node then exits 13 (unsettled top-level await).
      break;
    }
  }
  aborted = true;
} catch (e) {
  aborted = e instanceof OpenAI.APIUserAbortError;
  if (!aborted) console.log(`abort threw ${e.constructor.name}: ${e.message}`);
}
check(aborted && chunks < 50, `abort after 2 of 200 chunks: ${chunks} read`);
const after = await client.completions.create(greedy);
check(after.choices[0].text === full.choices[0].text, 'served after the abort');

finish();
