/**
 * `pixgate/sdk`: the SDK, re-exported for code that imported it from the server package before it
 * became its own package. New code imports `@pixgate/sdk` (packages/sdk, docs/sdk.md).
 */
export * from '@pixgate/sdk';
