// Issue 50 through the official OpenAI Node.js client against a live `pagoda serve
// --http-port` on DeepSeek-R1's chat template (run by tests/openai_node_test.py): prompt
// arrays on completions in lm-evaluation-harness's shapes (batched loglikelihood over token
// ids with echo and logprobs; generate_until over strings with stops), responses.create
// whole and streamed (reasoning items, output_text), and chat's reasoning_content whole and
// in stream deltas. Every check prints one line; the exit status is the number of failures.
import {check, client, finish, model, post} from './common.mjs';

// generate_until: a batch of string prompts, greedy, with stop strings; each choice is the
// prompt's own completion, usage summed.
const prompts = ['Once upon a time', 'The little dog'];
const until = {model, max_tokens: 24, temperature: 0, stop: ['\n\n', '.']};
const batch = await client.completions.create({...until, prompt: prompts});
const singles = await Promise.all(prompts.map((prompt) =>
    client.completions.create({...until, prompt})));
check(batch.choices.length === 2 &&
          batch.choices.every((c, i) => c.index === i && c.text === singles[i].choices[0].text &&
                              c.finish_reason === singles[i].choices[0].finish_reason) &&
          batch.usage.prompt_tokens ===
              singles[0].usage.prompt_tokens + singles[1].usage.prompt_tokens,
      `generate_until batch: ${JSON.stringify(batch.choices.map((c) => c.text))}`);

// loglikelihood: token-id prompts, one token generated, the prompt echoed with its
// logprobs (the first token's null), as lm-eval's local-completions sends them.
const ids = await Promise.all(['Once upon a time there was', 'The little dog ran'].map(
    async (content) => (await post('/tokenize', {content, add_special: true})).tokens));
const ll = await client.completions.create(
    {model, prompt: ids, max_tokens: 1, echo: true, logprobs: 1, temperature: 0, seed: 1234});
check(ll.choices.length === 2 &&
          ll.choices.every((c, i) => c.logprobs.token_logprobs.length === ids[i].length + 1 &&
                                     c.logprobs.token_logprobs[0] === null &&
                                     c.logprobs.token_logprobs.slice(1).every((x) => x <= 0)),
      `loglikelihood batch: ${ll.choices.map((c) => c.logprobs.token_logprobs.length)}`);

// Chat with reasoning: DeepSeek-R1's template opens <think>; thinking_token_budget closes it.
const question = 'Tell me a story about a cat.';
const reasoningParams = {model, max_tokens: 14, temperature: 0, thinking_token_budget: 4,
                         ignore_eos: true};
const chat = await client.chat.completions.create(
    {...reasoningParams, messages: [{role: 'user', content: question}]});
const message = chat.choices[0].message;
check(typeof message.reasoning_content === 'string' && message.reasoning_content.length > 0 &&
          typeof message.content === 'string' && message.content.length > 0,
      `chat reasoning_content: ${JSON.stringify(message)}`);
let streamedReasoning = '';
let streamedContent = '';
const chatStream = await client.chat.completions.create(
    {...reasoningParams, messages: [{role: 'user', content: question}], stream: true});
for await (const chunk of chatStream) {
  const delta = chunk.choices[0]?.delta ?? {};
  streamedReasoning += delta.reasoning_content ?? '';
  streamedContent += delta.content ?? '';
}
check(streamedReasoning === message.reasoning_content && streamedContent === message.content,
      `chat stream reasoning_content: ${JSON.stringify([streamedReasoning, streamedContent])}`);

// Responses: the same turn as a reasoning item and a message; output_text (the client's
// own) is the chat content.
const responseParams = {model, input: question, max_output_tokens: 14, temperature: 0,
                        thinking_token_budget: 4, ignore_eos: true};
const response = await client.responses.create(responseParams);
check(response.object === 'response' && response.status === 'incomplete' &&
          response.output.length === 2 && response.output[0].type === 'reasoning' &&
          response.output[0].content[0].text === message.reasoning_content &&
          response.output[1].type === 'message' && response.output_text === message.content &&
          response.usage.output_tokens === 14,
      `responses.create: ${JSON.stringify(response.output)}`);
const types = [];
let text = '';
let reasoning = '';
let last = null;
const stream = await client.responses.create({...responseParams, stream: true});
for await (const event of stream) {
  if (types.at(-1) !== event.type) types.push(event.type);
  if (event.type === 'response.output_text.delta') text += event.delta;
  if (event.type === 'response.reasoning_text.delta') reasoning += event.delta;
  if (event.type === 'response.completed' || event.type === 'response.incomplete') {
    last = event.response;
  }
}
const expected = ['response.created', 'response.in_progress', 'response.output_item.added',
                  'response.content_part.added', 'response.reasoning_text.delta',
                  'response.reasoning_text.done', 'response.content_part.done',
                  'response.output_item.done', 'response.output_item.added',
                  'response.content_part.added', 'response.output_text.delta',
                  'response.output_text.done', 'response.content_part.done',
                  'response.output_item.done', 'response.incomplete'];
check(JSON.stringify(types) === JSON.stringify(expected),
      `responses.create stream events: ${types.join(' ')}`);
check(text === response.output_text && reasoning === message.reasoning_content &&
          last !== null && last.output[1].content[0].text === text,
      `responses.create stream text: ${JSON.stringify([reasoning, text])}`);

// The client's stream helper and its final response.
const helper = client.responses.stream(responseParams);
let helperText = '';
helper.on('response.output_text.delta', (e) => { helperText += e.delta; });
const final = await helper.finalResponse();
check(helperText === response.output_text && final.output_text === response.output_text,
      `responses.stream finalResponse: ${JSON.stringify(final.output_text)}`);

finish();
