// The Key Vault holding OnceGate's HMAC key secret. Access is by Azure RBAC only (no access
// policies); the app reads the secret through a Key Vault reference with its user-assigned identity.
// The secret's value is written only when a new one is given (the first deployment): a redeploy
// leaves the secret, and every version of it, as it is.

@minLength(3)
@maxLength(24)
@description('Name of the Key Vault: 3-24 letters, digits and hyphens, unique in Azure.')
param name string

@description('Region of the Key Vault.')
param location string

@description('Tags of the Key Vault.')
param tags object

@description('Name of the secret holding ONCEGATE_KEY_SECRET.')
#disable-next-line secure-secrets-in-params // the secret's name, not its value
param keySecretName string

@secure()
@description('A new value for the secret, at least 32 characters, written as its latest version. Empty: the secret is not written, and the one in the vault stays.')
param newKeySecret string = ''

@description('Purge protection; irreversible once on.')
param enablePurgeProtection bool

@minValue(7)
@maxValue(90)
@description('Days a deleted vault or secret stays recoverable.')
param softDeleteRetentionInDays int

resource keyVault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: subscription().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: softDeleteRetentionInDays
    // The service takes true or nothing: "the property does not accept false as its value".
    enablePurgeProtection: enablePurgeProtection ? true : null
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: 'Allow'
    }
  }
}

// Conditional on a value: a deployment that declares the secret writes the declared value (a new
// version), so a deployment without a value must not declare it at all.
resource keySecretEntry 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = if (!empty(newKeySecret)) {
  parent: keyVault
  name: keySecretName
  properties: {
    value: newKeySecret
    contentType: 'text/plain'
  }
}

@description('Name of the Key Vault.')
output name string = keyVault.name

// Built from the vault, not read from keySecretEntry, which a redeploy does not declare.
@description('Versionless URI of the key secret, for the app setting\'s Key Vault reference (the app follows the latest version).')
output keySecretUri string = '${keyVault.properties.vaultUri}secrets/${keySecretName}'
