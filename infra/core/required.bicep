// Stops a deployment that lacks a value it needs: a module deployed only when the value is needed,
// whose parameter ARM checks against @minLength before the module deploys. The module's deployment name
// says what is missing, and ARM's message names this parameter: "Length of the value should be greater
// than or equal to '1'". Used instead of fail(), which not every scanner reads
// (tests/infra/test_checkov.py). Deploys nothing.

@secure()
@minLength(1)
@description('The value that must be given; the deployment\'s name says which.')
param value string
