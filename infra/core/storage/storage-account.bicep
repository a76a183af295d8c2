// The storage account: the Functions host's blobs and queues, the container Flex Consumption deploys
// the app package from, and OnceGate's claim tables. Shared keys are off, so every client signs in
// with Microsoft Entra ID (the app's user-assigned identity).

@minLength(3)
@maxLength(24)
@description('Name of the storage account: 3-24 lowercase letters and digits, unique in Azure.')
param name string

@description('Region of the storage account.')
param location string

@description('Tags of the storage account.')
param tags object

@description('Name of the blob container Flex Consumption deploys the app package from.')
param deploymentContainerName string

@description('Tables created up front for OnceGate\'s claims, conflicts and flow inventory.')
param tableNames array

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    dnsEndpointType: 'Standard'
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: 'Allow'
    }
  }
}

resource blobServices 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobServices
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource tableServices 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource tables 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' = [
  for tableName in tableNames: {
    parent: tableServices
    name: tableName
  }
]

@description('Name of the storage account.')
output name string = storage.name
