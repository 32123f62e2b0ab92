/** @type {import('jest').Config} */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  roots: ['<rootDir>/proto', '<rootDir>/control-plane', '<rootDir>/data-plane', '<rootDir>/cli', '<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  modulePathIgnorePatterns: ['<rootDir>/.*/dist/'],
  moduleNameMapper: {
    '^#proto/(.*)$': '<rootDir>/proto/src/$1',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.test.json' }],
  },
  testTimeout: 30000,
  // Tests and describe blocks run in a new random order within each file at every run, so that no test
  // leans on what another left behind; the seed is printed last (`npm test -- --seed=<N>` replays an order).
  randomize: true,
  showSeed: true,
};
