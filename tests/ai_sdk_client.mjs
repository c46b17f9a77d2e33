// A two-turn conversation through Vercel's AI SDK (`ai` with `@ai-sdk/openai-compatible`),
// as an app would hold it: the whole history each time, the second answer streamed.
// Run by tests/test_openai_third_party.py from the folder the packages were installed in.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, streamText } from 'ai';

const skald = createOpenAICompatible({
  name: 'skald',
  baseURL: process.env.SKALD_V1,
  apiKey: process.env.SKALD_TOKEN,
});
const messages = [{ role: 'user', content: 'My name is Ada' }];
const first = await generateText({ model: skald('skald'), messages });
messages.push({ role: 'assistant', content: first.text }, { role: 'user', content: 'What is my name?' });
const second = streamText({ model: skald('skald'), messages });
let text = '';
for await (const part of second.textStream) text += part;
console.log(JSON.stringify({ first: first.text, second: text }));
