import { youngGenerationHold } from './young-generation.js';

test("the growth factor is 1 while any hold lasts and back to V8's 2 when the last one ends; ending twice counts once", () => {
  const set: string[] = [];
  const hold = youngGenerationHold((flags) => set.push(flags));
  const endStartUp = hold();
  const endSync = hold();
  expect(set).toEqual(['--semi-space-growth-factor=1']);
  endSync();
  endSync();
  expect(set).toEqual(['--semi-space-growth-factor=1']);
  endStartUp();
  expect(set).toEqual(['--semi-space-growth-factor=1', '--semi-space-growth-factor=2']);
  hold();
  expect(set.at(-1)).toBe('--semi-space-growth-factor=1');
});
