// One new version of OnceGate's HMAC key secret, deployed only when a value is given (keyvault.bicep).
// A module of its own so that ARM checks the value's length itself, from the parameter's @minLength,
// before anything is written: a template function that stops a deployment (fail()) is not read by
// every scanner (tests/infra/test_checkov.py).

@description('Name of the Key Vault.')
param vaultName string

@description('Name of the secret holding ONCEGATE_KEY_SECRET.')
#disable-next-line secure-secrets-in-params // the secret's name, not its value
param name string

@secure()
@minLength(32)
@description('The new value of ONCEGATE_KEY_SECRET, at least 32 characters (oncegate.domain.keys.MIN_SECRET_LENGTH).')
param value string

resource keyVault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: vaultName
}

resource keySecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: keyVault
  name: name
  properties: {
    value: value
    contentType: 'text/plain'
  }
}

@description('URI of the version just written: what the app\'s Key Vault reference pins.')
output uriWithVersion string = keySecret.properties.secretUriWithVersion
