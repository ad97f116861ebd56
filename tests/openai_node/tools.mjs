// The official OpenAI Node.js client reads pagoda's structured outputs and tool calls (run by
// tests/openai_node_test.py --script tools.mjs against `pagoda serve --http-port` on
// stories260K with Qwen2.5's chat template, whose tool-call format is Hermes). The model is
// a tiny story model: constrained decoding guarantees the shape, not the content, so every
// check is on the shape (parsed by the client, validated here against the schema). Every
// check prints one line; the exit status is the number of failed checks.
import OpenAI from 'openai';

import {check, client, expectError, finish, model} from './common.mjs';

// Runs one group of checks; an exception (a client error where none was expected) fails it.
async function group(name, body) {
  try {
    await body();
  } catch (e) {
    check(false, `${name}: threw ${e?.constructor?.name} ${e?.status ?? ''} ${e?.message}`);
  }
}

// An independent validator for the JSON Schema subset used here: "" when `v` follows
// `schema`, else where and why not.
function validate(v, schema, at = '$') {
  const kind = v === null ? 'null' : Array.isArray(v) ? 'array'
             : Number.isInteger(v) ? 'integer' : typeof v;
  if (schema.enum !== undefined && !schema.enum.some((e) => e === v)) {
    return `${at}: ${JSON.stringify(v)} not in ${JSON.stringify(schema.enum)}`;
  }
  const types = schema.type === undefined ? [] : [].concat(schema.type);
  if (types.length > 0 &&
      !types.some((t) => t === kind || (t === 'number' && kind === 'integer'))) {
    return `${at}: ${kind}, not ${types.join('|')}`;
  }
  if (kind === 'string') {
    const n = [...v].length;  // code points
    if (n < (schema.minLength ?? 0)) return `${at}: shorter than ${schema.minLength}`;
    if (n > (schema.maxLength ?? Infinity)) return `${at}: longer than ${schema.maxLength}`;
  }
  if (kind === 'array') {
    if (v.length < (schema.minItems ?? 0)) return `${at}: under ${schema.minItems} items`;
    if (v.length > (schema.maxItems ?? Infinity)) return `${at}: over ${schema.maxItems} items`;
    for (let i = 0; i < v.length && schema.items; i++) {
      const why = validate(v[i], schema.items, `${at}[${i}]`);
      if (why) return why;
    }
  }
  if (kind === 'object') {
    const properties = schema.properties ?? {};
    for (const name of schema.required ?? []) {
      if (!(name in v)) return `${at}: missing ${name}`;
    }
    for (const [name, value] of Object.entries(v)) {
      if (name in properties) {
        const why = validate(value, properties[name], `${at}.${name}`);
        if (why) return why;
      } else if (schema.additionalProperties === false) {
        return `${at}: unexpected property ${name}`;
      }
    }
  }
  return '';
}

// An object that JSON.parse()s from `text` and follows `schema`: "" or why not.
function parsesTo(text, schema) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return `not JSON: ${e.message}`;
  }
  return validate(v, schema);
}

function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => kb.includes(k) && deepEqual(a[k], b[k]));
}

// ---------------------------------------------------------------------------------------
// Structured outputs.

const cardSchema = {
  type: 'object',
  properties: {
    title: {type: 'string', maxLength: 16},
    year: {type: 'integer'},
    mood: {enum: ['happy', 'sad', 'calm']},
    tags: {type: 'array', items: {type: 'string', maxLength: 8}, minItems: 1, maxItems: 3},
    hero: {
      type: 'object',
      properties: {name: {type: 'string', maxLength: 10}, brave: {type: 'boolean'}},
      required: ['name', 'brave'],
      additionalProperties: false,
    },
  },
  required: ['title', 'year', 'mood', 'tags', 'hero'],
  additionalProperties: false,
};
const cardFormat = {type: 'json_schema',
                    json_schema: {name: 'card', schema: cardSchema, strict: true}};

await group('json_object', async () => {
  const r = await client.chat.completions.create({
    model, messages: [{role: 'user', content: 'Give me JSON.'}],
    response_format: {type: 'json_object'}, max_tokens: 300, temperature: 0});
  const c = r.choices[0];
  let v;
  try { v = JSON.parse(c.message.content); } catch { v = undefined; }
  check(c.finish_reason === 'stop' && typeof v === 'object' && v !== null && !Array.isArray(v),
        `chat json_object: content parses to an object: ${JSON.stringify(c.message.content)}`);
});

// chat.completions.parse() fills message.parsed only for an "auto-parseable" response
// format: openai@6 makes those with helpers/zod (needs the zod package) or
// helpers/standard-schema (any Standard Schema object: here one written by hand around the
// validator above, with the JSON schema given explicitly). A plain json_schema object is
// sent as is but left unparsed (parsed: null), so the parseable one is used.
await group('json_schema parse()', async () => {
  const {standardResponseFormat} = await import('openai/helpers/standard-schema');
  const standard = {'~standard': {version: 1, vendor: 'pagoda-test', validate: (value) => {
    const why = validate(value, cardSchema);
    return why ? {issues: [{message: why}]} : {value};
  }}};
  const format = standardResponseFormat(standard, 'card', {schema: cardSchema});
  for (const [temperature, seed] of [[0, 0], [1, 1], [1, 2]]) {
    const r = await client.chat.completions.parse({
      model, messages: [{role: 'user', content: 'A story card.'}], response_format: format,
      max_tokens: 300, temperature, seed});
    const m = r.choices[0].message;
    const why = parsesTo(m.content, cardSchema);
    check(r.choices[0].finish_reason === 'stop' && typeof m.parsed === 'object' &&
              m.parsed !== null && validate(m.parsed, cardSchema) === '' && why === '' &&
              deepEqual(m.parsed, JSON.parse(m.content)),
          `chat json_schema via parse() (temperature ${temperature}, seed ${seed}): parsed ${
              JSON.stringify(m.parsed)} ${why}`);
  }
});

await group('json_schema completions', async () => {
  // Not in the client's types for completions; it passes the field through, and pagoda
  // takes it there.
  const r = await client.completions.create({
    model, prompt: 'Once upon a time', response_format: cardFormat, max_tokens: 300,
    temperature: 1, seed: 3});
  const why = parsesTo(r.choices[0].text, cardSchema);
  check(r.choices[0].finish_reason === 'stop' && why === '',
        `completions json_schema: ${JSON.stringify(r.choices[0].text)} ${why}`);
});

// ---------------------------------------------------------------------------------------
// Tool calls.

const weather = {
  type: 'object',
  properties: {city: {type: 'string', maxLength: 12}, unit: {enum: ['c', 'f']}},
  required: ['city', 'unit'],
  additionalProperties: false,
};
const time = {
  type: 'object',
  properties: {zone: {type: 'string', maxLength: 8}},
  required: ['zone'],
  additionalProperties: false,
};
const tools = [
  {type: 'function',
   function: {name: 'get_weather', description: 'The weather', parameters: weather}},
  {type: 'function', function: {name: 'get_time', parameters: time}},
];
const schemas = {get_weather: weather, get_time: time};
const messages = [{role: 'user', content: 'Weather in Paris?'}];
const required = {model, messages, tools, tool_choice: 'required', parallel_tool_calls: false,
                  temperature: 1, seed: 5, max_tokens: 200};
const named = {...required, tool_choice: {type: 'function', function: {name: 'get_weather'}}};
// Parallel calls allowed (the default): this model keeps calling until max_tokens.
const parallel = {...required, parallel_tool_calls: undefined, seed: 0, max_tokens: 300};

// Why the calls of `message` are not well formed ("" when they are): each an id, type
// "function", a name among `names` and arguments that parse and follow that tool's schema.
function badCalls(message, names = Object.keys(schemas)) {
  const calls = message.tool_calls;
  if (!Array.isArray(calls) || calls.length === 0) return 'no tool_calls';
  for (const [i, call] of calls.entries()) {
    if (typeof call.id !== 'string' || call.id === '') return `[${i}]: id ${call.id}`;
    if (call.type !== 'function') return `[${i}]: type ${call.type}`;
    if (!names.includes(call.function?.name)) return `[${i}]: name ${call.function?.name}`;
    const why = parsesTo(call.function.arguments, schemas[call.function.name]);
    if (why) return `[${i}] ${call.function.name}(${call.function.arguments}): ${why}`;
  }
  return '';
}

// name + arguments of each call (pagoda draws every id afresh: call_ and 24 random
// characters, so ids are compared by form only).
const shape = (calls) =>
  (calls ?? []).map((c) => ({name: c.function.name, arguments: c.function.arguments}));

let whole;  // the answer to `required`, for the stream and the round trip
let wholeParallel;
await group('tool_choice required', async () => {
  whole = await client.chat.completions.create(required);
  const c = whole.choices[0];
  const why = badCalls(c.message);
  check(why === '' && c.message.tool_calls.length === 1 && c.finish_reason === 'tool_calls' &&
            c.message.content === null && c.message.role === 'assistant',
        `tool_choice required, parallel_tool_calls false: one call ${
            JSON.stringify(c.message.tool_calls)} finish ${c.finish_reason} ${why}`);

  const n = await client.chat.completions.create(named);
  const nc = n.choices[0];
  const nwhy = badCalls(nc.message, ['get_weather']);
  check(nwhy === '' && nc.message.tool_calls.length === 1 && nc.finish_reason === 'tool_calls',
        `tool_choice {function: get_weather}: ${JSON.stringify(shape(nc.message.tool_calls))} ${
            nwhy}`);

  wholeParallel = await client.chat.completions.create(parallel);
  const p = wholeParallel.choices[0];
  const pwhy = badCalls(p.message);
  // Cut by max_tokens (the documented outcome with this model) the last call, if cut, is
  // left in content; a model that stops would finish with tool_calls.
  check(pwhy === '' && p.message.tool_calls.length >= 2 &&
            (p.finish_reason === 'tool_calls' ||
             (p.finish_reason === 'length' &&
              (p.message.content === null || p.message.content.startsWith('<tool_call>')))),
        `tool_choice required, parallel calls: ${p.message.tool_calls.length} calls, finish ${
            p.finish_reason}, content ${JSON.stringify(p.message.content)} ${pwhy}`);
});

// parse() parses the arguments of a tool marked strict: true without zod (openai@6's
// parser: JSON.parse for a strict function tool, the zod / standard-schema parser for an
// auto-parseable one).
await group('strict tool parse()', async () => {
  const strictTools = tools.map((t) => ({...t, function: {...t.function, strict: true}}));
  for (const seed of [5, 6]) {
    const r = await client.chat.completions.parse({...required, tools: strictTools, seed});
    const c = r.choices[0];
    const call = c.message.tool_calls?.[0];
    const why = badCalls(c.message);
    check(why === '' && c.message.tool_calls.length === 1 && c.finish_reason === 'tool_calls' &&
              typeof call.function.parsed_arguments === 'object' &&
              call.function.parsed_arguments !== null &&
              deepEqual(call.function.parsed_arguments, JSON.parse(call.function.arguments)) &&
              validate(call.function.parsed_arguments, schemas[call.function.name]) === '',
          `parse() with strict tools (seed ${seed}): parsed_arguments ${
              JSON.stringify(call?.function.parsed_arguments)} ${why}`);
  }
});

// The stream, read by hand: delta.tool_calls by index (id, type and name when a call
// starts, then argument fragments), and the finish reason.
async function reassemble(body) {
  const stream = await client.chat.completions.create({...body, stream: true});
  const calls = [];
  let content = '';
  let finish = null;
  let problem = '';
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (choice === undefined) continue;
    if (chunk.object !== 'chat.completion.chunk') problem ||= `object ${chunk.object}`;
    if (choice.finish_reason) finish = choice.finish_reason;
    content += choice.delta?.content ?? '';
    for (const d of choice.delta?.tool_calls ?? []) {
      if (d.id !== undefined) {  // a call starts
        if (d.index !== calls.length) problem ||= `call ${calls.length} starts at index ${d.index}`;
        if (typeof d.id !== 'string' || d.id === '' || d.type !== 'function' ||
            !d.function?.name) {
          problem ||= `call start ${JSON.stringify(d)}`;
        }
        calls[d.index] = {id: d.id, name: d.function?.name, arguments: ''};
      }
      if (calls[d.index] === undefined) {
        problem ||= `fragment for index ${d.index} before its start`;
        continue;
      }
      calls[d.index].arguments += d.function?.arguments ?? '';
    }
  }
  return {calls, content, finish, problem};
}

const sameCalls = (s, message) =>
  deepEqual(s.calls.map(({name, arguments: a}) => ({name, arguments: a})),
            shape(message.tool_calls));

await group('streamed tool calls', async () => {
  const s = await reassemble(required);
  const m = whole.choices[0].message;
  check(s.problem === '' && s.calls.length === 1 && sameCalls(s, m) &&
            s.finish === 'tool_calls' && s.content === '',
        `streamed (seed ${required.seed}): reassembled ${JSON.stringify(s.calls)} = whole, finish ${
            s.finish} ${s.problem}`);

  const sp = await reassemble(parallel);
  const mp = wholeParallel.choices[0];
  check(sp.problem === '' && sp.calls.length >= 2 && sameCalls(sp, mp.message) &&
            sp.finish === mp.finish_reason && sp.content === (mp.message.content ?? ''),
        `streamed parallel calls: ${sp.calls.length} reassembled by index = whole, finish ${
            sp.finish} ${sp.problem}`);

  // The client's own stream helper: its events and finalChatCompletion().
  const runner = client.chat.completions.stream(required);
  const done = [];
  runner.on('tool_calls.function.arguments.done', (e) => done.push(e));
  const final = await runner.finalChatCompletion();
  const fc = final.choices[0];
  check(fc.finish_reason === 'tool_calls' && badCalls(fc.message) === '' &&
            deepEqual(shape(fc.message.tool_calls), shape(m.tool_calls)) &&
            deepEqual(done.map((e) => ({name: e.name, arguments: e.arguments})),
                      shape(m.tool_calls)),
        `chat.completions.stream() finalChatCompletion: ${
            JSON.stringify(shape(fc.message.tool_calls))}, ${done.length} arguments.done events`);
});

// The client's answer goes back as the assistant turn, with the tool's result.
await group('tool result round trip', async () => {
  const call = whole.choices[0].message.tool_calls[0];
  const turns = [...messages, whole.choices[0].message,
                 {role: 'tool', tool_call_id: call.id, content: '{"temperature": 18}'}];
  const r = await client.chat.completions.create(
      {model, messages: turns, tools, tool_choice: 'none', max_tokens: 16, temperature: 0});
  const c = r.choices[0];
  check(c.message.role === 'assistant' && typeof c.message.content === 'string' &&
            c.message.tool_calls === undefined && ['stop', 'length'].includes(c.finish_reason),
        `tool result round trip (id ${call.id}): ${JSON.stringify(c.message.content)} finish ${
            c.finish_reason}`);
  const again = await client.chat.completions.create({...required, messages: turns});
  const why = badCalls(again.choices[0].message);
  check(why === '' && again.choices[0].finish_reason === 'tool_calls',
        `after the tool result, required: ${
            JSON.stringify(shape(again.choices[0].message.tool_calls))} ${why}`);
});

// Errors the client raises as BadRequestError, naming the field.
await expectError(OpenAI.BadRequestError, 400, 'tool_choice names an unknown function',
                  () => client.chat.completions.create(
                      {...required, tool_choice: {type: 'function', function: {name: 'nope'}}}),
                  (e) => e.message.includes('tool_choice.function.name'));
await expectError(OpenAI.BadRequestError, 400, 'json_schema with an unsupported keyword',
                  () => client.chat.completions.create({
                    model, messages, max_tokens: 8,
                    response_format: {type: 'json_schema', json_schema: {
                      name: 'n',
                      schema: {type: 'object', properties: {n: {type: 'integer', minimum: 3}}}}}}),
                  (e) => e.message.includes('response_format.json_schema.schema') &&
                         e.message.includes('minimum'));

finish();
