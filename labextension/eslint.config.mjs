// ESLint for the labextension (flat config): typescript-eslint's recommended rules, the usual
// JupyterLab extension-template conventions, and no formatting rules (Prettier owns formatting).
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['node_modules/', 'lib/', 'build-test/', '.yarn/', '**/*.d.ts'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  // Turns off the rules that Prettier's formatting makes moot; those set below stay on.
  prettier,
  {
    files: ['src/**/*.{ts,tsx}', 'test/**/*.ts'],
    rules: {
      '@typescript-eslint/naming-convention': [
        'error',
        { selector: 'interface', format: ['PascalCase'], custom: { regex: '^I[A-Z]', match: true } }
      ],
      '@typescript-eslint/no-unused-vars': ['warn', { args: 'none' }],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-namespace': 'off',
      '@typescript-eslint/no-use-before-define': 'off',
      curly: ['error', 'all'],
      eqeqeq: 'error',
      'prefer-arrow-callback': 'error'
    }
  },
  {
    // The plugin's wiring stays in small parts, one concern each.
    files: ['src/index.ts', 'src/plugin/**/*.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 30, skipBlankLines: true, skipComments: true }]
    }
  },
  {
    files: ['*.js'],
    languageOptions: { sourceType: 'commonjs', globals: { module: 'readonly', require: 'readonly' } }
  }
);
